"""The results directory (docs/internals.md "Results directory", schema_version 1).

Everything is written atomically and the run directory is complete and loadable after every cell:
``cell.json`` / ``acceptance.json`` per cell, then ``manifest.json`` and ``cells.csv`` /
``cells.parquet`` rewritten. ``load_run`` reads it back through :func:`specbench.io.load_json`,
which refuses corrupt, truncated and other-version files naming the file (InputError, exit 2).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.errors import InputError
from specbench.io import atomic_write_bytes, atomic_write_text, load_json, save_json

MANIFEST = "manifest.json"
CELL_JSON = "cell.json"
ACCEPTANCE_JSON = "acceptance.json"
SUMMARY_JSON = "summary.json"

BASE_COLUMNS = ["run_id", "cell_id", "repeat", "status", "is_baseline"]
TAIL_COLUMNS = ["requests", "errors", "output_tok_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "e2e_p50_ms"]
# llmperf summary key -> (column, scale to the column's unit)
_SUMMARY_KEYS = {
    "results_num_completed_requests": ("requests", 1),
    "results_number_errors": ("errors", 1),
    "results_mean_output_throughput_token_per_s": ("output_tok_per_s", 1),
    "results_ttft_s_quantiles_p50": ("ttft_p50_ms", 1000),
    "results_ttft_s_quantiles_p99": ("ttft_p99_ms", 1000),
    "results_inter_token_latency_s_quantiles_p50": ("itl_p50_ms", 1000),
    "results_end_to_end_latency_s_quantiles_p50": ("e2e_p50_ms", 1000),
}


def scrub_text(text: str, secrets: list[str]) -> str:
    """Replace every occurrence of a secret value (len >= 4; shorter ones would hit ordinary text)."""
    for s in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


def scrub_file(path: Path, secrets: list[str]) -> None:
    if not path.is_file() or not [s for s in secrets if s and len(s) >= 4]:
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    scrubbed = scrub_text(text, secrets)
    if scrubbed != text:
        atomic_write_text(path, scrubbed)


def secret_values(env: dict[str, str], argv: list[str]) -> list[str]:
    """The values that redaction hides in ``env`` / ``argv``: what must not appear in any file."""
    from specbench.server import redact_argv, redact_env

    out = [v for k, v in env.items() if redact_env({k: v})[k] != v]
    red = redact_argv(argv)
    for orig, shown in zip(argv, red):
        if orig != shown:
            out.append(orig.split("=", 1)[1] if "=" in shown else orig)
    return out


@dataclass
class CellData:
    cell_id: str
    dir: Path
    cell: dict[str, Any]
    acceptance: dict[str, Any] | None
    summary: dict[str, Any] | None

    @property
    def status(self) -> str:
        return self.cell.get("status", "missing")


@dataclass
class Run:
    path: Path
    manifest: dict[str, Any]
    cells: dict[str, CellData] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    def cells_frame(self):
        """One row per cell (tidy), columns as in docs/internals.md; axes named after the axis."""
        import pandas as pd

        rows = [cell_row(self.run_id, c.cell, c.acceptance, c.summary) for c in self.cells.values()]
        return _frame(pd, rows, self.manifest.get("axes", []))


def cell_dir(run_dir: Path, cell_id: str) -> Path:
    return Path(run_dir) / cell_id


def write_cell(run_dir: Path, cell_record: dict[str, Any], acceptance: dict[str, Any] | None) -> None:
    d = cell_dir(run_dir, cell_record["cell_id"])
    if acceptance is not None:
        save_json(d / ACCEPTANCE_JSON, acceptance)
    else:  # an earlier attempt's acceptance must not stand beside this attempt's record
        (d / ACCEPTANCE_JSON).unlink(missing_ok=True)
    # cell.json last: its presence with status "done" marks the cell complete (used by --resume).
    save_json(d / CELL_JSON, cell_record)


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    save_json(Path(run_dir) / MANIFEST, manifest)


def write_tables(run_dir: Path, run_id: str, axes: list[str], cells: list[tuple[dict, dict | None, dict | None]]) -> None:
    """cells.csv and cells.parquet from (cell.json, acceptance.json, summary.json) triples."""
    import pandas as pd

    frame = _frame(pd, [cell_row(run_id, c, a, s) for c, a, s in cells], axes)
    buf = io.StringIO()
    frame.to_csv(buf, index=False)
    atomic_write_text(Path(run_dir) / "cells.csv", buf.getvalue())
    pbuf = io.BytesIO()
    frame.to_parquet(pbuf, index=False)
    atomic_write_bytes(Path(run_dir) / "cells.parquet", pbuf.getvalue())


def cell_row(run_id: str, cell: dict, acceptance: dict | None, summary: dict | None) -> dict[str, Any]:
    from specbench.run.cells import axis_label

    row: dict[str, Any] = {
        "run_id": run_id, "cell_id": cell["cell_id"], "repeat": cell.get("repeat"),
        "status": cell.get("status"), "is_baseline": cell.get("is_baseline"),
    }
    for axis, value in (cell.get("axes") or {}).items():
        row[axis_label(axis)] = value
    if acceptance:
        counts = (acceptance.get("prometheus") or {}).get("counts") or {}
        derived = acceptance.get("derived") or {}
        intervals = (acceptance.get("ci") or {}).get("intervals") or {}
        row["num_spec_tokens"] = acceptance.get("num_spec_tokens")
        for key in ("num_drafts", "draft_tokens", "accepted_tokens"):
            row[key] = counts.get(key)
        row["mean_acceptance_length"] = derived.get("mean_acceptance_length")
        _ci(row, "mean_acceptance_length", intervals)
        row["draft_acceptance_rate"] = derived.get("draft_acceptance_rate")
        for i, p in enumerate(derived.get("per_position") or []):
            row[f"p{i}"] = p
            _ci(row, f"p{i}", intervals)
        for i, a in enumerate(derived.get("conditional") or []):
            row[f"a{i}"] = a
    for key, (col, scale) in _SUMMARY_KEYS.items():
        value = (summary or {}).get(key)
        row[col] = value * scale if isinstance(value, (int, float)) and value is not None else None
    s = summary or {}
    # One meaning per column across load drivers: server-true throughput where the summary has it
    # (llmperf's own tokenizer-based figure stays in summary.json), and no per-chunk ITL under the
    # per-token column.
    if "specbench_output_tok_per_s" in s:
        v = s["specbench_output_tok_per_s"]
        row["output_tok_per_s"] = v if isinstance(v, (int, float)) else None
    if s.get("specbench_itl_method") == "llmperf_per_chunk":
        row["llmperf_itl_per_chunk_p50_ms"], row["itl_p50_ms"] = row["itl_p50_ms"], None
    return row


def _ci(row: dict, name: str, intervals: dict) -> None:
    low, high = intervals.get(name) or (None, None)
    row[f"{name}_ci_low"], row[f"{name}_ci_high"] = low, high


def _frame(pd, rows: list[dict], axes: list[str]):
    from specbench.run.cells import axis_label

    axis_cols = [axis_label(a) for a in axes]
    metric_cols = ["num_spec_tokens", "num_drafts", "draft_tokens", "accepted_tokens", "mean_acceptance_length",
                   "mean_acceptance_length_ci_low", "mean_acceptance_length_ci_high", "draft_acceptance_rate"]
    seen = set(BASE_COLUMNS + axis_cols + metric_cols + TAIL_COLUMNS)
    extra = sorted({k for r in rows for k in r if k not in seen}, key=_pos_key)
    cols = BASE_COLUMNS + axis_cols + metric_cols + extra + TAIL_COLUMNS
    frame = pd.DataFrame(rows, columns=cols)
    # Counts stay integers even where a baseline or failed row has none (nullable Int64).
    for col in ("repeat", "num_spec_tokens", "num_drafts", "draft_tokens", "accepted_tokens", "requests", "errors"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("Int64")
    # An axis may mix ints and strings (`flag:--max-num-seqs: [4, "many"]`); Parquet needs one type
    # per column, so such an axis is written as text (None stays missing).
    for col in axis_cols:
        if len({type(v) for v in frame[col] if v is not None and v == v}) > 1:
            frame[col] = frame[col].map(lambda v: v if v is None or v != v else str(v))
    return frame


def _pos_key(name: str) -> tuple:
    # p0, p0_ci_low, p0_ci_high, p1, ... then a0, a1, ...
    m = re.match(r"^([pa])(\d+)(.*)$", name)
    if not m:
        return (2, 0, name)
    order = {"": 0, "_ci_low": 1, "_ci_high": 2}.get(m.group(3), 3)
    return (0 if m.group(1) == "p" else 1, int(m.group(2)), order)


def load_run(path: Path) -> Run:
    """Read a run directory; InputError naming the file for anything missing, corrupt or foreign."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a directory; pass a run directory (results/<run-id>)")
    manifest = load_json(path / MANIFEST)
    if not isinstance(manifest.get("cells"), list) or "run_id" not in manifest:
        raise InputError(f"{path / MANIFEST}: not a specbench run manifest (no run_id / cells)")
    run = Run(path=path, manifest=manifest)
    for cell_id in manifest["cells"]:
        d = cell_dir(path, cell_id)
        if not (d / CELL_JSON).exists():
            continue  # not run yet (an interrupted run): the manifest still lists it
        try:
            cell = load_json(d / CELL_JSON)
            acc = load_json(d / ACCEPTANCE_JSON) if (d / ACCEPTANCE_JSON).exists() else None
            summary = load_summary(d / SUMMARY_JSON)
        except InputError as exc:
            raise InputError(_cell_fix(str(exc), d, path)) from None
        run.cells[cell_id] = CellData(cell_id=cell_id, dir=d, cell=cell, acceptance=acc, summary=summary)
    return run


def _cell_fix(message: str, cell_path: Path, run_dir: Path) -> str:
    # --resume refuses a damaged run too, so "re-run with --resume" alone would go in a circle:
    # without the cell's directory the cell counts as never run, and --resume runs it again.
    if "schema_version" in message:
        return message
    return f"{message.split('; ')[0]}; delete {cell_path} and run 'specbench run --resume {run_dir}' to re-run that cell"


def load_summary(path: Path) -> dict | None:
    # summary.json keeps llmperf's key names (no schema_version: llmperf tools read it as is).
    import json

    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{path}: corrupt or truncated JSON; re-run the cell (specbench run --resume)") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data

"""The results directory (docs/contracts.md "Results directory", schema_version 1).

Everything is written atomically and the run directory is complete and loadable after every cell:
``cell.json`` / ``acceptance.json`` per cell, then ``manifest.json`` and ``cells.csv`` /
``cells.parquet`` rewritten. ``load_run`` reads it back through :func:`specbench.io.load_json`,
which refuses corrupt, truncated and other-version files naming the file (InputError, exit 2).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from specbench.axis import axis_label
from specbench.errors import InputError
from specbench.io import (
    MAX_JSON_BYTES,
    atomic_write_bytes,
    atomic_write_text,
    load_json,
    read_jsonl_lines,
    read_text,
    save_json,
)
from specbench.records.cell import Attested
from specbench.records.files import Acceptance, CellRecord, Manifest, as_record, load
from specbench.records.requests import RequestRecord, numbered_requests
from specbench.redact import redact_strings
from specbench.safe_yaml import loads_json

MANIFEST = "manifest.json"
CELL_JSON = "cell.json"
ACCEPTANCE_JSON = "acceptance.json"
SUMMARY_JSON = "summary.json"
REQUESTS_JSONL = "requests.jsonl"
PAIRED_BASELINE = "paired_baseline"  # a cell's folder of its baseline's interleaved requests (run/interleave.py)

BASE_COLUMNS = ["run_id", "cell_id", "repeat", "status", "is_baseline"]
TAIL_COLUMNS = [
    "requests",
    "errors",
    "load_stop",
    "ci_method",
    "output_tok_per_s",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "e2e_p50_ms",
]


class CellData:
    """One cell of a loaded run: its typed records (``record``: cell.json, ``acc``: acceptance.json)
    and llmperf summary."""

    def __init__(
        self,
        cell_id: str,
        dir: Path,
        cell: CellRecord | dict[str, Any],
        acceptance: Acceptance | dict[str, Any] | None,
        summary: dict[str, Any] | None,
        requests: list[dict[str, Any]] | None = None,
    ):
        self.cell_id, self.dir, self.summary = cell_id, Path(dir), summary
        self.record = as_record(CellRecord, cell, Path(dir) / CELL_JSON)
        self.acc = None if acceptance is None else as_record(Acceptance, acceptance, Path(dir) / ACCEPTANCE_JSON)
        self.requests = requests  # in memory (vllm bench sweeps); else requests.jsonl

    @property
    def status(self) -> str:
        return self.record.status

    def has_requests(self) -> bool:
        """The cell kept its requests (a requests.jsonl, possibly empty, or rows in memory)."""
        return self.requests is not None or _exists(self.dir / REQUESTS_JSONL)

    def request_rows(self) -> tuple[list[tuple[int, dict[str, Any]]], str]:
        """``(line number, row)`` of each request as written and where they were read: the cell's
        requests.jsonl, or the rows held in memory (a vllm bench result, numbered from 1); no rows
        when the cell has neither. Report reads them as :meth:`request_records`; compare checks the
        values as written first (compare/values.py), then validates them the same way."""
        path = self.dir / REQUESTS_JSONL
        if self.requests is None and _exists(path):
            return read_jsonl_lines(path), str(path)
        return list(enumerate(self.requests or [], 1)), f"{self.dir} (requests of the benchmark result)"

    def request_records(self) -> list[RequestRecord]:
        """The cell's requests validated once as records (InputError naming file, line and field),
        each tagged with the cell's repeat."""
        return numbered_requests(*self.request_rows(), self.record.repeat)

    def paired_baseline_records(self) -> list[RequestRecord] | None:
        """The requests its baseline's server answered interleaved with this cell's load
        (``load.interleave``, run/interleave.py), validated and tagged with the cell's repeat; None
        when it has none."""
        if not self._paired():
            return None
        path = self.dir / PAIRED_BASELINE / REQUESTS_JSONL
        return numbered_requests(read_jsonl_lines(path), path, self.record.repeat)

    def _paired(self) -> bool:
        info = self.record.paired_baseline
        return (
            info is not None
            and bool(info.blocks)
            and not info.error
            and _exists(self.dir / PAIRED_BASELINE / REQUESTS_JSONL)
        )

    def paired_baseline_tok_per_s(self) -> float | None:
        """The load throughput of those interleaved baseline requests (their summary.json)."""
        if not self._paired():
            return None
        tput = (load_summary(self.dir / PAIRED_BASELINE / SUMMARY_JSON) or {}).get(
            "results_mean_output_throughput_token_per_s"
        )
        return float(tput) if isinstance(tput, (int, float)) else None


@dataclass
class Run:
    path: Path
    manifest: Manifest
    cells: dict[str, CellData] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    def cells_frame(self):
        """One row per cell (tidy), columns as in docs/contracts.md; axes named after the axis."""
        import pandas as pd

        rows = [cell_row(self.run_id, c.record, c.acc, c.summary) for c in self.cells.values()]
        return _frame(pd, rows, self.manifest.axes)


def cell_dir(run_dir: Path, cell_id: str) -> Path:
    return Path(run_dir) / cell_id


LOCK = ".specbench.lock"


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the run directory: two ``run --resume`` of one directory would
    delete each other's cells. The lock is the kernel's (flock), so a killed holder releases it."""
    import fcntl

    path = Path(run_dir) / LOCK
    while True:
        fh = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise InputError(
                f"{run_dir}: another specbench (pid {holder}) is writing this run; wait for it "
                "to finish or stop it, then resume"
            ) from None
        # The holder unlinks the file when done: a lock won on that unlinked file locks nothing.
        try:
            if os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        fh.close()
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
    finally:
        fh.close()


def write_cell(
    run_dir: Path, cell_record: CellRecord | dict[str, Any], acceptance: Acceptance | dict[str, Any] | None
) -> None:
    """Save a cell's records (dicts are validated as records first, so a writer's bug is caught here)."""
    cell_record = as_record(CellRecord, cell_record, CELL_JSON)
    d = cell_dir(run_dir, cell_record.cell_id)
    if acceptance is not None:
        save_json(d / ACCEPTANCE_JSON, as_record(Acceptance, acceptance, ACCEPTANCE_JSON).dump())
    else:  # an earlier attempt's acceptance must not stand beside this attempt's record
        (d / ACCEPTANCE_JSON).unlink(missing_ok=True)
    # cell.json last: its presence with status "done" marks the cell complete (used by --resume).
    save_json(d / CELL_JSON, cell_record.dump())


def write_manifest(run_dir: Path, manifest: Manifest | dict[str, Any]) -> None:
    save_json(Path(run_dir) / MANIFEST, as_record(Manifest, manifest, MANIFEST).dump())


def write_tables(
    run_dir: Path, run_id: str, axes: list[str], cells: list[tuple[CellRecord, Acceptance | None, dict | None]]
) -> None:
    """cells.csv and cells.parquet from (cell.json, acceptance.json, summary.json) triples."""
    rows = [
        cell_row(run_id, as_record(CellRecord, c), None if a is None else as_record(Acceptance, a), s)
        for c, a, s in cells
    ]
    _write_frame(run_dir, rows, axes)


def _write_frame(run_dir: Path, rows: list[dict[str, Any]], axes: list[str]) -> None:
    import pandas as pd

    frame = _frame(pd, rows, axes)
    buf = io.StringIO()
    frame.to_csv(buf, index=False)
    atomic_write_text(Path(run_dir) / "cells.csv", buf.getvalue())
    pbuf = io.BytesIO()
    frame.to_parquet(pbuf, index=False)
    atomic_write_bytes(Path(run_dir) / "cells.parquet", pbuf.getvalue())


class Tables:
    """The run's cells.csv / cells.parquet, rewritten after every cell from rows kept in memory.

    Each row is built once, when its cell is saved, from the records in hand and that cell's own
    summary.json; so saving after the n-th cell reads no earlier cell's files (re-reading them all
    after each cell made a run's saving quadratic in its cells). Rows follow ``cell_ids`` (the plan's
    order); a cell saved again (``--resume``) replaces its row."""

    def __init__(self, run_dir: Path, run_id: str, axes: list[str], cell_ids: list[str]):
        self.run_dir, self.run_id, self.axes = Path(run_dir), run_id, list(axes)
        self.order = {cid: i for i, cid in enumerate(cell_ids)}
        self.rows: dict[str, dict[str, Any]] = {}

    def read_existing(self) -> Tables:
        """Take in, once, the cells already on disk (a resumed run's earlier cells)."""
        for cid in self.order:
            d = cell_dir(self.run_dir, cid)
            if (d / CELL_JSON).exists():
                acc = load(Acceptance, d / ACCEPTANCE_JSON) if (d / ACCEPTANCE_JSON).exists() else None
                self.add(load(CellRecord, d / CELL_JSON), acc)
        return self

    def add(self, record: CellRecord, acceptance: Acceptance | None) -> None:
        summary = load_summary(cell_dir(self.run_dir, record.cell_id) / SUMMARY_JSON)
        self.rows[record.cell_id] = cell_row(self.run_id, record, acceptance, summary)

    def write(self) -> None:
        rows = sorted(self.rows.items(), key=lambda kv: self.order.get(kv[0], len(self.order)))
        _write_frame(self.run_dir, [r for _, r in rows], self.axes)


def cell_row(run_id: str, cell: CellRecord, acceptance: Acceptance | None, summary: dict | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": run_id,
        "cell_id": cell.cell_id,
        "repeat": cell.repeat,
        "status": cell.status,
        "is_baseline": cell.is_baseline,
        # why a precision-driven load stopped (precision_reached | max_requests | errors); none for a fixed N
        "load_stop": cell.precision.reason if cell.precision else None,
    }
    for axis, value in cell.axes.items():
        row[axis_label(axis)] = value
    if acceptance:
        counts = acceptance.prometheus.counts
        derived = acceptance.derived
        ci = acceptance.ci
        row["num_spec_tokens"] = acceptance.num_spec_tokens
        if ci is not None:  # records written before `method` was recorded hold a percentile bootstrap
            row["ci_method"] = ci.method or "percentile bootstrap"
        for key in ("num_drafts", "draft_tokens", "accepted_tokens"):
            row[key] = getattr(counts, key) if counts is not None else None
        row["mean_acceptance_length"] = derived.mean_acceptance_length
        _ci(row, "mean_acceptance_length", ci)
        row["draft_acceptance_rate"] = derived.draft_acceptance_rate
        for i, p in enumerate(derived.per_position):
            row[f"p{i}"] = p
            _ci(row, f"p{i}", ci)
        for i, a in enumerate(derived.conditional):
            row[f"a{i}"] = a
    row.update(attested_columns(cell.attested))
    row.update(summary_columns(summary))
    return row


def attested_columns(attested: Attested | None) -> dict[str, Any]:
    """What vLLM said the cell ran (cell.json ``attested``) as table columns; none for a run from
    before attestation. ``not_attested`` lists the fields vLLM did not print."""
    if attested is None:
        return {}
    variant = attested.head_variant
    return {
        "attested_mla": attested.mla,
        "attention_backend": attested.attention_backend,
        "attested_k": attested.num_speculative_tokens,
        "attested_output_norm": variant.output_norm if variant else None,
        "attested_pos0_mask": variant.pos0_mask if variant else None,
        "not_attested": ";".join(sorted(attested.unattested or {})) or None,
    }


# summary.json's llmperf keys (written by load/summary.py) -> (specbench column, scale to the column's
# unit): cells.csv (cell_row) and compare's summary fallback (compare/sides.py) read the same map
# through summary_columns.
SUMMARY_COLUMNS = {
    "results_num_completed_requests": ("requests", 1),
    "results_number_errors": ("errors", 1),
    "results_mean_output_throughput_token_per_s": ("output_tok_per_s", 1),
    "results_ttft_s_quantiles_p50": ("ttft_p50_ms", 1000),
    "results_ttft_s_quantiles_p99": ("ttft_p99_ms", 1000),
    "results_inter_token_latency_s_quantiles_p50": ("itl_p50_ms", 1000),
    "results_end_to_end_latency_s_quantiles_p50": ("e2e_p50_ms", 1000),
}


def summary_columns(summary: dict[str, Any] | None) -> dict[str, Any]:
    """A summary.json's figures under specbench's column names (None where absent or not a number).

    One meaning per column across load drivers: server-true throughput where the summary has it
    (llmperf's own tokenizer-based figure stays in summary.json), and llmperf's per-chunk ITL moved
    to ``llmperf_itl_per_chunk_p50_ms``, never standing in for the per-token one."""
    s = summary or {}
    out: dict[str, Any] = {}
    for key, (col, scale) in SUMMARY_COLUMNS.items():
        value = s.get(key)
        out[col] = value * scale if isinstance(value, (int, float)) else None
    if "specbench_output_tok_per_s" in s:
        v = s["specbench_output_tok_per_s"]
        out["output_tok_per_s"] = v if isinstance(v, (int, float)) else None
    if s.get("specbench_itl_method") == "llmperf_per_chunk":
        out["llmperf_itl_per_chunk_p50_ms"], out["itl_p50_ms"] = out["itl_p50_ms"], None
    return out


def _ci(row: dict, name: str, ci) -> None:
    row[f"{name}_ci_low"], row[f"{name}_ci_high"] = ci.interval(name) if ci is not None else (None, None)


def _frame(pd, rows: list[dict], axes: list[str]):
    axis_cols = [axis_label(a) for a in axes]
    metric_cols = [
        "num_spec_tokens",
        "num_drafts",
        "draft_tokens",
        "accepted_tokens",
        "mean_acceptance_length",
        "mean_acceptance_length_ci_low",
        "mean_acceptance_length_ci_high",
        "draft_acceptance_rate",
    ]
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


def load_run(path: Path, *, resuming: bool = False) -> Run:
    """Read a specbench run directory; InputError naming the file for anything missing, corrupt or
    foreign (readers that also take `vllm bench sweep` directories use :func:`specbench.results.read.read_run`).

    ``resuming``: a deleted cell directory is the documented way to have --resume re-run a cell."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a directory; pass a run directory (results/<run-id>)")
    manifest = load_json(path / MANIFEST)
    if not isinstance(manifest.get("cells"), list) or "run_id" not in manifest:
        raise InputError(f"{path / MANIFEST}: not a specbench run manifest (no run_id / cells)")
    if not resuming:  # what a reader shows: a secret a writer missed (or a hand edit added) stays hidden
        manifest = redact_strings(manifest)
    # validated once, as the reader will hold it (redaction only replaces strings with strings)
    run = Run(path=path, manifest=Manifest.parse(manifest, path / MANIFEST, "restore the file from a copy of the run"))
    # A run that ended "done" wrote every cell; in other states a listed cell may never have run.
    finished = manifest.get("status") == "done" and not resuming
    for cell_id in manifest["cells"]:
        d = _confined_cell_dir(path, cell_id)
        if not _exists(d / CELL_JSON):
            if finished:  # deleted or moved: say so rather than count it as "not run"
                raise InputError(
                    f"{d}: missing, but {path / MANIFEST} says the run finished; restore it, or run "
                    f"'specbench run --resume {path}' to re-run that cell"
                )
            continue  # not run yet (an interrupted run): the manifest still lists it
        try:
            cell = load(CellRecord, d / CELL_JSON)
            acc = load(Acceptance, d / ACCEPTANCE_JSON) if _exists(d / ACCEPTANCE_JSON) else None
            summary = load_summary(d / SUMMARY_JSON)
        except InputError as exc:
            raise InputError(_cell_fix(str(exc), d, path)) from None
        run.cells[cell_id] = CellData(cell_id=cell_id, dir=d, cell=cell, acceptance=acc, summary=summary)
    return run


def _confined_cell_dir(run_dir: Path, cell_id: str) -> Path:
    """The cell's directory, refusing ids that would read outside the run (``../x``, ``/etc``)."""
    manifest = run_dir / MANIFEST
    if not cell_id or cell_id in (".", "..") or any(c in cell_id for c in "/\\\0") or cell_id.startswith("."):
        raise InputError(f"{manifest}: cells: {cell_id!r} is not a cell id (a directory name inside the run)")
    d = cell_dir(run_dir, cell_id)
    try:
        inside = d.resolve().is_relative_to(run_dir.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        raise InputError(f"{d}: symlink loop; replace it with the cell's directory or delete it and --resume") from None
    if not inside:
        raise InputError(f"{d}: links outside the run directory {run_dir}; copy the cell into the run instead")
    return d


def _exists(path: Path) -> bool:
    try:
        path.stat()
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:  # ELOOP, EACCES, ENOTDIR: say so rather than treat the cell as not run
        raise InputError(f"{path}: cannot read ({exc.strerror}); restore the cell or delete it and --resume") from None


def _cell_fix(message: str, cell_path: Path, run_dir: Path) -> str:
    # --resume refuses a damaged run too, so "re-run with --resume" alone would go in a circle:
    # without the cell's directory the cell counts as never run, and --resume runs it again.
    if "schema_version" in message:
        return message
    return (
        f"{message.split('; ')[0]}; delete {cell_path} and run 'specbench run --resume {run_dir}' to re-run that cell"
    )


def load_summary(path: Path) -> dict | None:
    # summary.json keeps llmperf's key names (no schema_version: llmperf tools read it as is).
    if not _exists(path):
        return None
    text = read_text(path, "summary", fix="re-run the cell (specbench run --resume)", max_bytes=MAX_JSON_BYTES)
    try:
        data = loads_json(text, path)
    except ValueError:
        raise InputError(f"{path}: corrupt or truncated JSON; re-run the cell (specbench run --resume)") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data

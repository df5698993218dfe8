"""``vllm bench sweep serve`` output directories and ``vllm bench serve`` result files as runs.

Both become a :class:`specbench.results.store.Run` in memory (nothing is written), so ``report`` and
``compare`` read them like a ``specbench run`` directory. Layout written by vLLM 0.32
(``vllm/benchmarks/sweep/serve.py``; ``serve_workload.py`` adds the ``WL-`` part)::

    OUTPUT_DIR/EXPERIMENT/                  pass this directory (EXPERIMENT: -e, else a timestamp)
      summary.csv                           all runs of all points (written when the sweep ends)
      SERVE--<serve comb>-BENCH--<bench comb>[-WL--<var>=<value>]/     one point
        run=0.json ... run=N-1.json         `vllm bench serve` results, with ``run_number`` and the
                                            point's serve and bench parameters merged in at top level
        summary.json                        the list of the point's runs (when the point finished)
        warmup.json                         unmeasured warm-up (--warmup-num-prompts): ignored
        run=N.failure.json                  a failed run (--continue-on-error)
      SERVE--<serve comb>-failure.json      a server that failed to start (--continue-on-error)

A comb is named by its ``_benchmark_name`` or its ``key=value`` pairs joined by ``-`` (``/`` in a
name becomes ``_``); no serve (bench) parameters leave the SERVE (BENCH) part out, neither leaves
the runs in EXPERIMENT itself. Each run file is a cell (``<axis>-<value>__...__r<N>``, repeat N); the point's
parameters are its axes, told apart from result keys by matching ``key=value`` in the directory
name (a comb named by ``_benchmark_name`` becomes one axis ``serve`` / ``bench`` with that name).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from specbench.analysis.acceptance import DEFINITION, acceptance, counts_from_records
from specbench.axis import value_slug
from specbench.errors import InputError
from specbench.metrics.vllm_bench import (
    PROVENANCE,
    BenchResult,
    read_bench_file,
    request_rows,
    spec_record,
    summary,
)
from specbench.records.files import Manifest
from specbench.results.store import CellData, Run

RUN_FILE_RE = re.compile(r"^run=(\d+)\.json$")
FAILURE_RE = re.compile(r"^run=(\d+)\.failure\.json$")
_SECTION_RE = re.compile(r"(?:^|-)(SERVE|BENCH|WL)-")


def _point_dirs(path: Path) -> list[Path]:
    dirs = [
        p
        for p in sorted(path.iterdir())
        if p.is_dir() and any(RUN_FILE_RE.match(f.name) or FAILURE_RE.match(f.name) for f in p.iterdir())
    ]
    if any(RUN_FILE_RE.match(f.name) for f in path.iterdir()):
        dirs.insert(0, path)  # neither serve nor bench parameters: the runs lie in the experiment directory
    return dirs


def is_sweep_dir(path: Path | str) -> bool:
    """A directory holding ``run=N.json`` files directly or in point subdirectories (no manifest.json)."""
    path = Path(path)
    if not path.is_dir() or (path / "manifest.json").exists():
        return False
    try:
        return bool(_point_dirs(path))
    except OSError:
        return False


def _sanitize(name: str) -> str:
    # vllm/benchmarks/sweep/utils.py sanitize_filename
    return name.replace("/", "_").replace("..", "__").strip("'").strip('"')


def sections(name: str) -> dict[str, str]:
    """``SERVE--a=1-BENCH--b=2`` -> {"serve": "a=1", "bench": "b=2"}."""
    marks = list(_SECTION_RE.finditer(name))
    out = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(name)
        out[m.group(1).lower()] = name[m.end() : end].lstrip("-")
    return out


def _has_token(text: str, token: str) -> bool:
    return text == token or text.startswith(token + "-") or text.endswith("-" + token) or f"-{token}-" in text


def point_axes(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """The point's serve / bench / workload parameters, found as ``key=value`` in its directory name."""
    axes: dict[str, Any] = {}
    for section, text in sections(name).items():
        found = {
            k: v
            for k, v in data.items()
            if k not in ("run_number", "_benchmark_name")
            and not isinstance(v, (list, dict))
            and _has_token(text, _sanitize(f"{k}={v}"))
        }
        if found:
            axes.update(found)
        elif text:
            axes[section] = text  # named by _benchmark_name
    return axes


def _acceptance(res: BenchResult) -> tuple[dict[str, Any] | None, list[str]]:
    """An ``acceptance.json``-shaped dict: vllm bench's /metrics difference as the exact total."""
    rec, warnings = spec_record(res)
    if rec is None:
        return None, warnings
    units, w = counts_from_records([rec])
    warnings += w
    if not units:
        return None, warnings
    c = units[0]
    a = acceptance(c)
    derived = {
        "mean_acceptance_length": a.mean_acceptance_length,
        "draft_acceptance_rate": a.draft_acceptance_rate,
        "per_position": a.per_position,
        "conditional": a.conditional,
    }
    return {
        "schema_version": 1,
        "definition": DEFINITION,
        "source": "vllm-bench-serve",
        "num_spec_tokens": c.num_spec_tokens,
        "prometheus": {"counts": c.to_dict()},
        "derived": derived,
        "warnings": warnings + a.warnings,
    }, warnings


def _cell(cell_id: str, where: Path, res: BenchResult, axes: dict[str, Any], repeat: int) -> CellData:
    acc, warnings = _acceptance(res)
    rows, w = request_rows(res)
    cell = {
        "cell_id": cell_id,
        "axes": axes,
        "repeat": repeat,
        "is_baseline": False,
        "status": "done",
        "source_file": res.file,
        "date": res.data.get("date"),
    }
    if acc is None:
        cell["reason"] = f"{Path(res.file).name} has no spec_decode_* counts"
    else:
        acc["warnings"] = list(dict.fromkeys(acc["warnings"] + w))
    return CellData(cell_id=cell_id, dir=where, cell=cell, acceptance=acc, summary=summary(res), requests=rows)


def _constant_provenance(results: list[BenchResult], axes: set[str]) -> dict[str, Any]:
    """resolved_config-shaped settings every result agrees on (those that vary are axes)."""
    config: dict[str, Any] = {"load": {"driver": "vllm bench serve"}}
    for key, (section, field), _ in PROVENANCE:
        values = [r.data.get(key) for r in results]
        if key in axes or values[0] is None or any(v != values[0] for v in values):
            continue
        config.setdefault(section, {})[field] = values[0]
    return config


def _manifest(run_id: str, source: str, results: list[BenchResult], cells: dict[str, CellData]) -> dict[str, Any]:
    axes = list(dict.fromkeys(a for c in cells.values() for a in c.record.axes))
    dates = sorted(str(r.data["date"]) for r in results if r.data.get("date"))
    return {
        "run_id": run_id,
        "source": source,
        "axes": axes,
        "cells": list(cells),
        "resolved_config": _constant_provenance(results, set(axes)),
        "started_at": dates[0] if dates else None,
        "ended_at": dates[-1] if dates else None,
    }


def load_sweep(path: Path | str) -> Run:
    """A ``vllm bench sweep serve`` experiment directory as a run; InputError naming what is wrong."""
    path = Path(path)
    if not is_sweep_dir(path):
        raise InputError(
            f"{path}: no run=N.json files in it or its subdirectories; pass the experiment "
            "directory of `vllm bench sweep serve` (OUTPUT_DIR/EXPERIMENT)"
        )
    cells: dict[str, CellData] = {}
    results: list[BenchResult] = []
    for point in _point_dirs(path):
        name = "" if point == path else point.name
        point_id = name or "point"
        for f in sorted(point.iterdir(), key=lambda p: p.name):
            m, fail = RUN_FILE_RE.match(f.name), FAILURE_RE.match(f.name)
            if m:
                res = read_bench_file(f)[0]
                results.append(res)
                axes = point_axes(name, res.data)
                cid = _cell_id(axes, point_id, int(m.group(1)))
                cells[cid] = _cell(cid, point, res, axes, int(m.group(1)))
            elif fail:
                failed = _failed(point_id, name, f, int(fail.group(1)))
                cells.setdefault(failed.cell_id, failed)
    if not results:
        raise InputError(f"{path}: the sweep has only failed runs; nothing to read")
    manifest = Manifest.model_validate(_manifest(path.name, "vllm bench sweep", results, cells))
    return Run(path=path, manifest=manifest, cells=cells)


def _cell_id(axes: dict[str, Any], point_id: str, repeat: int) -> str:
    """``max_num_seqs-4__max_concurrency-1__r0``, as ``specbench run`` names its cells."""
    parts = [f"{k}-{value_slug(v)}" for k, v in axes.items()] or [point_id]
    return "__".join(parts + [f"r{repeat}"])


def _failed(point_id: str, name: str, f: Path, repeat: int) -> CellData:
    try:
        info = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    params = {**(info.get("serve_overrides") or {}), **(info.get("bench_overrides") or {})}
    reason = f"{info.get('error_type', 'error')}: {info.get('error', 'see ' + f.name)}"
    axes = point_axes(name, params)
    cid = _cell_id(axes, point_id, repeat)
    cell = {
        "cell_id": cid,
        "axes": axes,
        "repeat": repeat,
        "is_baseline": False,
        "status": "failed",
        "reason": reason,
        "source_file": str(f),
    }
    return CellData(cell_id=cid, dir=f.parent, cell=cell, acceptance=None, summary=None)


def load_bench_file(path: Path | str) -> Run:
    """A ``vllm bench serve`` result file as a run: one cell per saved result (``--append-result``
    files hold several; settings that differ between them are the axes)."""
    path = Path(path)
    results = read_bench_file(path)
    varying = [
        key for key, _, _ in PROVENANCE if len({json.dumps(r.data.get(key), sort_keys=True) for r in results}) > 1
    ]
    cells: dict[str, CellData] = {}
    seen: dict[tuple, int] = {}
    for i, res in enumerate(results):
        axes = {k: res.data.get(k) for k in varying}
        key = tuple(sorted((k, str(v)) for k, v in axes.items()))
        repeat = seen[key] = seen.get(key, -1) + 1
        cid = path.stem if len(results) == 1 else f"{path.stem}#{i + 1}"
        cells[cid] = _cell(cid, path.parent, res, axes, repeat)
    manifest = Manifest.model_validate(_manifest(path.name, "vllm bench serve", results, cells))
    return Run(path=path, manifest=manifest, cells=cells)


def side_notes(run: Run) -> list[str]:
    """What ``compare`` says about a vllm bench side: the settings the files record (the mismatch
    guard compares those), what they do not record, and the readers' warnings."""
    cfg = run.manifest.resolved_config or {}
    settings = [
        f"{label} {cfg[section][field]}"
        for key, (section, field), label in PROVENANCE
        if field in cfg.get(section, {}) and key != "dataset_name"
    ]
    dates = run.manifest.started_at, run.manifest.ended_at
    when = f"date {dates[0]}" + (f" to {dates[1]}" if dates[1] != dates[0] else "") if dates[0] else "no date"
    axes = run.manifest.axes
    out = [
        f"{run.path.name}: {run.manifest.source} ({when}; {', '.join(settings) or 'no settings recorded'}"
        + (f"; axes {', '.join(axes)}" if axes else "")
        + "); vLLM version, draft, k, sampling and machine "
        "are not recorded in its files and were not checked; its inter-token latencies are per streamed chunk "
        "(specbench's driver measures per token): compare itl_p50_ms only between vllm bench results"
    ]
    for cid, c in run.cells.items():
        out += [f"{cid}: {w}" for w in (c.acc.warnings if c.acc is not None else [])]
    return out

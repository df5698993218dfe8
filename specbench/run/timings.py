"""What servers and loads took on this machine, kept so ``run --dry-run`` can estimate a study's wall time.

Why: on DeepSeek-R1 a cold start (weights, compile, CUDA graphs) is many minutes and decides what a
study costs, but it is known only once measured. Every finished cell of a run adds its server's
start-up (``timings.startup_s``, where the cell started the server) and its load's seconds per request
to a small file; the dry-run reads the last measurement of the same server settings back. A setting
never measured here stays "unknown": an estimate is never made up from another model or machine.

Keys: the server settings that decide a start-up (the model as the config names it, the speculative
method or ``none`` for a baseline, k, compiled or eager, MLA, tensor-parallel size) plus the host name, since
the cache directory may be shared between machines. A load's seconds per request is also keyed by
concurrency and max_tokens. The file is ``$SPECBENCH_TIMINGS_FILE`` (``off``: nothing kept or read),
else ``$SPECBENCH_CACHE/timings.json``, else ``~/.cache/specbench/timings.json``. It is a cache: an
unreadable or foreign file counts as empty (and is replaced on the next write), never an error.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from specbench.axis import on_off
from specbench.io import atomic_write_text, cache_path
from specbench.records.cell import Spec

ENV = "SPECBENCH_TIMINGS_FILE"
VERSION = 1


def timings_path() -> Path | None:
    return cache_path("timings.json", ENV)


def server_key(model: str, spec: Spec | None) -> str:
    """The start-up's key: model, method (``none`` for a baseline), k, compile mode, MLA, TP size, host."""
    spec = spec or Spec()
    mode = "eager" if spec.compiled is False else "compiled"
    mla = on_off(spec.mla)
    k = f" k {spec.num_speculative_tokens} |" if spec.num_speculative_tokens else ""
    return (
        f"{model} | method {spec.method or 'none'} |{k} {mode} | mla {mla} | tp {spec.tp or 1} | "
        f"host {socket.gethostname()}"
    )


def load_key(server: str, concurrency: int, max_tokens: int) -> str:
    return f"{server} | concurrency {concurrency} | max_tokens {max_tokens}"


def read(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """{"startups": {key: {...}}, "loads": {key: {...}}}; empty where nothing (readable) is kept."""
    path = timings_path() if path is None else path
    empty: dict[str, dict[str, Any]] = {"startups": {}, "loads": {}}
    if path is None:
        return empty
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return empty
    if not isinstance(data, dict) or data.get("schema_version") != VERSION:
        return empty
    return {k: v if isinstance(v := data.get(k), dict) else {} for k in empty}


def note_cell(
    model: str,
    record: Any,
    concurrency: int,
    max_tokens: int,
    num_requests: int | None,
    run_id: str,
    path: Path | None = None,
) -> None:
    """Keep what a finished cell measured: its server's start-up (where this cell started it: a
    later cell of a shared server has 0.0) and, for a fixed load of ``num_requests``, its seconds
    per request. Nothing for a failed cell; a write that fails is skipped (a cache, not a result)."""
    path = timings_path() if path is None else path
    if path is None or record.status != "done":
        return
    startup, load_s = record.timings.startup_s, record.timings.load_s
    if not startup and not (load_s and num_requests):
        return
    key = server_key(model, record.spec)
    data = read(path)
    at = record.ended_at
    if startup:
        data["startups"][key] = {"startup_s": startup, "at": at, "run_id": run_id, "cell_id": record.cell_id}
    if load_s and num_requests:
        data["loads"][load_key(key, concurrency, max_tokens)] = {
            "s_per_request": round(load_s / num_requests, 4),
            "requests": num_requests,
            "at": at,
            "run_id": run_id,
        }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"schema_version": VERSION, **data}, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass


def note_run_cell(study: Any, cell: Any, record: Any, run_id: str) -> None:
    """:func:`note_cell` for a cell of ``study`` as the run's plan has it (its load axes applied)."""
    if cell is None:
        return
    ld = study.load
    concurrency = int(cell.load.get("concurrency", ld.concurrency))
    max_tokens = int(cell.load.get("max_tokens", ld.max_tokens))
    n = ld.num_requests if ld.until is None else None  # a precision-driven load's size is not known here
    note_cell(study.serve.model, record, concurrency, max_tokens, n, run_id)

"""The one reader of what ``report`` and ``compare`` are given: each input path is one kind, read
one way, into a run (cells with their acceptance.json) or a file's windows.

- ``run``: a ``specbench run`` directory (:func:`specbench.results.store.load_run`), a ``vllm bench
  sweep serve`` directory or a ``vllm bench serve --save-result`` file (:mod:`specbench.results.sweep`
  reads both as a run).
- ``acceptance``: one cell's acceptance.json (its units chosen by
  :func:`specbench.records.files.acceptance_units`, as for a run's cells).
- ``records``: a vLLM/SGLang server log, a Prometheus scrape, or canonical records as JSON lines
  (``specbench parse`` output), whose spec-decode records become log windows
  (:class:`specbench.analysis.windows.WindowCounter`) as they are read.

Above the store and the sweep reader, so the store knows nothing of sweeps."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from specbench.analysis.acceptance import RateOnlySummary, rate_only_summary
from specbench.analysis.windows import WindowCounter
from specbench.errors import InputError
from specbench.io import open_input, read_jsonl
from specbench.metrics import parse
from specbench.metrics.prometheus import looks_like_prometheus
from specbench.metrics.record import SpecDecodeRecord
from specbench.metrics.vllm_bench import sniff
from specbench.records.counts import Counts
from specbench.records.files import Manifest, ci_units
from specbench.results.store import MANIFEST, Run, load_run
from specbench.results.sweep import is_sweep_dir, load_bench_file, load_sweep
from specbench.safe_yaml import loads_json

InputKind = Literal["run", "acceptance", "records"]
HEAD = 65536  # bytes that decide a file's kind: a multi-GB log is never read whole to learn it


def input_kind(path: Path) -> InputKind:
    """What ``path`` is; InputError naming it when it is missing or a directory of neither kind."""
    path = Path(path)
    if path.is_dir():
        if (path / MANIFEST).exists() or is_sweep_dir(path):
            return "run"
        raise InputError(
            f"{path}: a directory without manifest.json; pass a specbench run directory "
            "(results/<run-id>), a vllm bench sweep directory, or log / /metrics files"
        )
    head = _head(path)
    if sniff(head):
        return "run"  # a vllm bench serve result file: one cell per saved result
    if head.lstrip().startswith("{") and _is_acceptance_json(path):
        return "acceptance"
    return "records"


def is_run(path: Path) -> bool:
    """``path`` is read as a run (a run or sweep directory, or a vllm bench result file)."""
    try:
        return input_kind(path) == "run"
    except InputError:
        return False


def read_run(path: Path, *, resuming: bool = False) -> Run:
    """The run at ``path``; InputError naming the file for anything missing, corrupt or foreign."""
    path = Path(path)
    if path.is_dir() and not (path / MANIFEST).exists() and is_sweep_dir(path):
        return load_sweep(path)
    if path.is_file() and sniff(_head(path)):
        return load_bench_file(path)
    return load_run(path, resuming=resuming)


def as_run(run: Path | Run) -> Run:
    """``run`` itself when already read, else :func:`read_run` of the path: a report reads each run
    once and hands the same :class:`Run` to every part of it."""
    return run if isinstance(run, Run) else read_run(run)


def own_run_id(manifest: Manifest | None) -> str | None:
    """The id a specbench run gave itself, which its copies share; None for a vllm bench result or
    sweep read as a run, whose "id" is only its file or directory name (two of one name are two runs)."""
    if manifest is None or str(manifest.source or "").startswith("vllm bench"):
        return None
    return manifest.run_id or None


@dataclass
class FileUnits:
    """The spec-decode windows of one or more ``records`` files, as a cell's CI units."""

    units: list[Counts]
    unit: str  # "window", or "total" (fewer than two windows drafted: one unit, no interval)
    windows: list[Counts]  # every window read, in input order (the units are those that drafted)
    warnings: list[str] = field(default_factory=list)
    rate_only: RateOnlySummary | None = None


def read_windows(paths: Iterable[Path]) -> FileUnits:
    """The windows of ``paths`` read in order as one stream (a record is turned into counts as it
    is read, never all held) and the CI units :func:`specbench.records.files.ci_units` chooses from them."""
    counter = WindowCounter()
    warnings: list[str] = []
    for p in paths:
        warnings += stream_records(p, counter.add)
    return file_units(counter, warnings)


def file_units(counter: WindowCounter, warnings: list[str] | None = None) -> FileUnits:
    """The units of the records already fed to ``counter``, after the files' parse ``warnings``."""
    windows, w = counter.finish()
    drafted = [c for c in windows if c.num_drafts]
    units, unit = ci_units(None, windows, sum(drafted[1:], drafted[0]) if drafted else None)
    return FileUnits(units, unit, windows, [*(warnings or []), *w], rate_only_summary(counter.rate_only))


def stream_records(path: Path, each: Callable[[Any], None]) -> list[str]:
    """Hand each record of one ``records`` file (log, Prometheus scrape or canonical JSONL) to
    ``each``, in order, as it is read; returns the parse warnings."""
    path = Path(path)
    head = _head(path)
    if head.lstrip().startswith("{") and not sniff(head):  # canonical JSONL, not a vllm bench result
        for r in read_jsonl(path):
            if r.get("kind") == "spec_decode":
                each(SpecDecodeRecord.from_dict(r))
        return []
    if looks_like_prometheus(head):
        for rec in parse.parse_prometheus(_read(path), file=str(path)):
            each(rec)
        return []
    return list(parse.parse_file(path, each=each).warnings)


def _read(path: Path, limit: int = -1) -> str:
    if path.is_dir():
        raise InputError(f"{path}: a directory without manifest.json; pass log files or a specbench run directory")
    if not path.exists():
        raise InputError(f"{path}: no such run directory or file; pass results/<run-id> or a log / /metrics file")
    try:
        fh, size = open_input(path, "input")  # a FIFO or device in a run or sweep directory never blocks
        with fh:
            return fh.read(size if limit < 0 else min(limit, size)).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such run directory or file; pass results/<run-id> or a log / /metrics file"
        ) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror}); check permissions") from None


def _head(path: Path) -> str:
    return _read(Path(path), limit=HEAD)


def _is_acceptance_json(path: Path) -> bool:
    """A cell's acceptance.json (read as a cell, not as records)."""
    try:
        data = loads_json(_read(path), path)
    except ValueError:
        return False
    return isinstance(data, dict) and "prometheus" in data and "definition" in data

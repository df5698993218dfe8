"""Inputs of ``specbench report``: files and run directories -> labelled groups of summable units.

A file is a vLLM/SGLang log (read by :func:`specbench.metrics.parse.parse_file`), a Prometheus
scrape, or canonical records as JSON lines (``specbench parse`` output). A run directory
(``specbench run``) gives one group per cell from its ``acceptance.json``: exact Prometheus counts
for the point estimate, per-request units or log windows for the CI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.analysis.acceptance import Counts, RateOnlySummary, point_estimates, rate_only_summary
from specbench.analysis.windows import WindowCounter
from specbench.errors import ConfigError, InputError
from specbench.io import read_jsonl
from specbench.metrics import parse
from specbench.metrics.record import SpecDecodeRecord
from specbench.metrics.vllm_bench import sniff
from specbench.records import Acceptance, ci_units, load
from specbench.run.cells import axis_label
from specbench.run.read import read_run
from specbench.run.sweep import is_sweep_dir
from specbench.safe_yaml import loads_json


@dataclass
class Group:
    label: str
    units: list[Counts]
    unit: str  # what one unit is: "window", "request", "scrape" or "total" (records.ci_units)
    total: Counts | None = None  # exact totals when known (Prometheus); else the units' sum is used
    warnings: list[str] = field(default_factory=list)
    rate_only: RateOnlySummary | None = None
    axes: dict[str, str] | None = None  # run-dir cells only
    repeat: int | None = None
    title: str = ""  # what tables show (axis values for run-dir cells); label when empty
    attested: dict | None = None  # run-dir cells: what vLLM said it ran (cell.json, specbench/attest.py)

    def point(self) -> dict[str, float]:
        return point_estimates([self.total] if self.total is not None else self.units)


def parse_label(text: str) -> tuple[str, Path]:
    """``NAME=FILE`` from ``--label``; ConfigError naming the flag otherwise."""
    name, sep, file = text.partition("=")
    if not sep or not name.strip() or not file.strip():
        raise ConfigError(f"--label {text!r}: expected NAME=FILE, e.g. --label mla-on=server.log")
    return name.strip(), Path(file.strip())


def is_run_dir(path: Path) -> bool:
    """A ``specbench run`` directory, or a ``vllm bench sweep serve`` one (read as a run)."""
    return Path(path).is_dir() and ((Path(path) / "manifest.json").is_file() or is_sweep_dir(path))


def _read_text(path: Path, limit: int = -1) -> str:
    if path.is_dir():
        raise InputError(f"{path}: a directory without manifest.json; pass log files or a specbench run directory")
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found; check the path") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror}); check permissions") from None


def _looks_prometheus(text: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith("# HELP") or head.startswith("# TYPE") or "\nvllm:" in head or head.startswith("vllm:")


def _is_acceptance_json(path: Path) -> bool:
    """A cell's acceptance.json (read as counts, not as records)."""
    if not Path(path).is_file() or not _read_text(Path(path), limit=4096).lstrip().startswith("{"):
        return False  # a log: never read whole just to learn it is not JSON
    try:
        data = loads_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "prometheus" in data and "definition" in data


def read_records(path: Path) -> tuple[list[Any], list[str]]:
    """Records and parse warnings of one input file (log, Prometheus scrape or canonical JSONL)."""
    records: list[Any] = []
    warnings = stream_records(path, records.append)
    return records, warnings


def stream_records(path: Path, each: Callable[[Any], None]) -> list[str]:
    """Hand each record of one input file (log, Prometheus scrape or canonical JSONL) to ``each``,
    in order, as it is read; returns the parse warnings. A log's records are never all held."""
    path = Path(path)
    # Only the head decides the kind: a multi-GB log is streamed by parse_file, never held as text.
    text = _read_text(path, limit=65536)

    if text.lstrip().startswith("{") and not sniff(text[:65536]):  # canonical JSONL, not a vllm bench result
        for r in read_jsonl(path):
            if r.get("kind") == "spec_decode":
                each(SpecDecodeRecord.from_dict(r))
        return []
    if _looks_prometheus(text):
        for rec in parse.parse_prometheus(_read_text(path), file=str(path)):
            each(rec)
        return []
    return list(parse.parse_file(path, each=each).warnings)


def group_from_records(label: str, records: list[Any], warnings: list[str] | None = None) -> Group:
    counter = WindowCounter()
    for rec in records:
        counter.add(rec)
    return _group(label, counter, list(warnings or []))


def _group(label: str, counter: WindowCounter, warnings: list[str]) -> Group:
    """The group of the records fed to ``counter``, after the files' parse ``warnings``."""
    units, w = counter.finish()
    group = Group(
        label=label, units=units, unit="window", warnings=warnings + w, rate_only=rate_only_summary(counter.rate_only)
    )
    if not units and group.rate_only is None:
        group.warnings.append("no spec-decode metrics found (is speculative decoding on, and stats logging?)")
    return group


def _default_label(path: Path) -> str:
    # a cell's acceptance.json is named after its cell directory
    return path.parent.name if path.name == "acceptance.json" and path.parent.name else path.name


def groups_from_files(files: list[Path], labels: list[tuple[str, Path]]) -> list[Group]:
    """One group per unlabelled file (named after it), one per ``--label`` name (files in order)."""
    labelled = {Path(p) for _, p in labels}
    members: dict[str, list[Path]] = {}
    for name, p in labels:
        members.setdefault(name, []).append(Path(p))
    names = [_default_label(Path(f)) for f in files]
    for f, name in zip(files, names):
        if Path(f) in labelled:
            continue
        name = name if names.count(name) == 1 else str(f)
        if name in members:
            raise ConfigError(f"--label {name}: the name is also the file name of {f}; pick another label")
        members.setdefault(name, []).append(Path(f))
    groups = []
    for name, paths in members.items():
        counter = WindowCounter()  # records become window counts as they are read, never all held
        warnings: list[str] = []
        if any(_is_acceptance_json(p) for p in paths):
            if len(paths) > 1:
                raise ConfigError(f"--label {name}: an acceptance.json cannot share a label with other files")

            groups.append(group_from_acceptance(name, load(Acceptance, paths[0]), str(paths[0])))
            continue
        for p in paths:
            warnings += stream_records(p, counter.add)
        groups.append(_group(name, counter, warnings))
    return groups


def _load_run(path: Path):
    return read_run(path)


def _axis_label(axis: str) -> str:
    return axis_label(axis)


def groups_from_run(path: Path, *, prefix: bool = False) -> list[Group]:
    """One group per cell of a run directory (baseline cells, which have no speculation, are skipped)."""
    run = _load_run(path)
    groups = []
    for cell_id, cell in run.cells.items():
        label = f"{run.run_id}/{cell_id}" if prefix else cell_id
        axes = {_axis_label(str(k)): str(v) for k, v in cell.record.axes.items()}
        common = {"axes": axes, "repeat": cell.record.repeat}
        acc = cell.acc
        attested = cell.record.attested
        if acc is not None and acc.baseline:
            continue
        if cell.status != "done" or acc is None:
            why = cell.record.reason or ("no acceptance.json" if acc is None else cell.status)
            groups.append(
                Group(
                    label,
                    [],
                    "window",
                    warnings=[f"cell not usable ({cell.status}): {why}"],
                    attested=attested,
                    **common,
                )
            )
            continue
        group = group_from_acceptance(label, acc, str(cell.dir / "acceptance.json"), **common)
        group.attested = attested
        groups.append(group)
    if not groups:
        raise InputError(f"{path}: no finished speculative cells to report; run `specbench run` first")
    return groups


def group_from_acceptance(
    label: str, acc: Acceptance, where: str, axes: dict[str, str] | None = None, repeat: int | None = None
) -> Group:
    """A cell's ``acceptance.json``: Prometheus totals; per-request units or log windows for the CI."""
    prom = acc.prometheus.counts.at(where) if acc.prometheus.counts is not None else None
    windows = [w.at(f"{where} logs.windows[{i}]") for i, w in enumerate(acc.logs.windows)]
    units_of = acc.per_request.units if acc.per_request is not None else []
    requests = [u.at(f"{where} per_request.units[{i}]") for i, u in enumerate(units_of)]
    units, unit = ci_units(requests, windows, prom)
    warnings = list(acc.warnings)
    agreement = acc.agreement
    for key, what in (("logs_vs_prometheus", "log windows"), ("per_request_vs_prometheus", "per-request counts")):
        if getattr(agreement, key) is False:
            detail = agreement.details.get(key.split("_vs_")[0], "")
            warnings.append(f"{what} disagree with the Prometheus counts {detail}".rstrip())
    return Group(label, units, unit, total=prom, warnings=warnings, axes=axes, repeat=repeat)

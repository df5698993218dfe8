"""Inputs of ``specbench report``: files and runs -> labelled groups of summable units.

Every path is read by :mod:`specbench.results.read`, the reader ``compare`` uses too: a run (a
``specbench run`` or ``vllm bench sweep`` directory, a ``vllm bench serve`` result file) gives one
group per cell from its ``acceptance.json`` (exact Prometheus counts for the point estimate,
per-request units or log windows for the CI); a log, Prometheus scrape or ``specbench parse`` JSONL
gives one group of log windows per file or ``--label`` name; a cell's acceptance.json one group.
Which units a group's CI runs over is :func:`specbench.records.files.ci_units`'s choice, as everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.analysis.acceptance import RateOnlySummary, point_estimates
from specbench.analysis.windows import WindowCounter
from specbench.axis import axis_label
from specbench.errors import ConfigError, InputError
from specbench.records.cell import Attested
from specbench.records.counts import Counts
from specbench.records.files import Acceptance, acceptance_units, load
from specbench.results.read import FileUnits, file_units, input_kind, is_run, read_run, read_windows, stream_records
from specbench.results.store import Run


@dataclass
class Group:
    label: str
    units: list[Counts]
    unit: str  # what one unit is: "window", "request", "scrape" or "total" (records.files.ci_units)
    total: Counts | None = None  # exact totals when known (Prometheus); else the units' sum is used
    warnings: list[str] = field(default_factory=list)
    rate_only: RateOnlySummary | None = None
    axes: dict[str, str] | None = None  # run-dir cells only
    repeat: int | None = None
    title: str = ""  # what tables show (axis values for run-dir cells); label when empty
    attested: Attested | None = None  # run-dir cells: what vLLM said it ran (cell.json, specbench/serve/attest.py)

    def point(self) -> dict[str, float]:
        return point_estimates([self.total] if self.total is not None else self.units)


def parse_label(text: str) -> tuple[str, Path]:
    """``NAME=FILE`` from ``--label``; ConfigError naming the flag otherwise."""
    name, sep, file = text.partition("=")
    if not sep or not name.strip() or not file.strip():
        raise ConfigError(f"--label {text!r}: expected NAME=FILE, e.g. --label mla-on=server.log")
    return name.strip(), Path(file.strip())


def is_run_dir(path: Path) -> bool:
    """Read as a run: a ``specbench run`` directory, a ``vllm bench sweep serve`` directory or a
    ``vllm bench serve`` result file (results/read.py decides, for report and compare alike)."""
    return is_run(path)


def read_records(path: Path) -> tuple[list[Any], list[str]]:
    """Records and parse warnings of one input file (log, Prometheus scrape or canonical JSONL)."""
    records: list[Any] = []
    warnings = stream_records(path, records.append)
    return records, warnings


def group_from_records(label: str, records: list[Any], warnings: list[str] | None = None) -> Group:
    counter = WindowCounter()
    for rec in records:
        counter.add(rec)
    return _group(label, file_units(counter, list(warnings or [])))


def _group(label: str, read: FileUnits) -> Group:
    """The group of one label's files, with the units the reader chose (records.files.ci_units)."""
    group = Group(label=label, units=read.units, unit=read.unit, warnings=read.warnings, rate_only=read.rate_only)
    if not read.units and group.rate_only is None:
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
            if Path(f) in members[name]:
                raise ConfigError(f"{f}: given twice; pass each input once")
            raise ConfigError(f"--label {name}: the name is also the file name of {f}; pick another label")
        members.setdefault(name, []).append(Path(f))
    groups = []
    for name, paths in members.items():
        kinds = [input_kind(p) for p in paths]
        for p, kind in zip(paths, kinds):
            if kind == "run" and p.is_dir():  # a labelled vllm bench result file is read for its counts
                raise ConfigError(f"--label {name}={p}: a run is labelled by its cells' axes; pass {p} without --label")
        if "acceptance" in kinds:
            if len(paths) > 1:
                raise ConfigError(f"--label {name}: an acceptance.json cannot share a label with other files")
            groups.append(group_from_acceptance(name, load(Acceptance, paths[0]), str(paths[0])))
            continue
        groups.append(_group(name, read_windows(paths)))  # records become windows as they are read
    return groups


def groups_from_run(path: Path | Run, *, prefix: bool = False) -> list[Group]:
    """One group per cell of a run (baseline cells, which have no speculation, are skipped)."""
    run = path if isinstance(path, Run) else read_run(path)
    groups: list[Group] = []
    for cell_id, cell in run.cells.items():
        label = f"{run.run_id}/{cell_id}" if prefix else cell_id
        axes = {axis_label(str(k)): str(v) for k, v in cell.record.axes.items()}
        repeat = cell.record.repeat
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
                    axes=axes,
                    repeat=repeat,
                )
            )
            continue
        group = group_from_acceptance(label, acc, str(cell.dir / "acceptance.json"), axes, repeat)
        group.attested = attested
        groups.append(group)
    if not groups:
        raise InputError(f"{run.path}: no finished speculative cells to report; run `specbench run` first")
    return groups


def group_from_acceptance(
    label: str, acc: Acceptance, where: str, axes: dict[str, str] | None = None, repeat: int | None = None
) -> Group:
    """A cell's ``acceptance.json``: Prometheus totals; per-request units or log windows for the CI."""
    prom = acc.prometheus.counts.at(where) if acc.prometheus.counts is not None else None
    units, unit, left_out = acceptance_units(acc, where)
    warnings = [*acc.warnings, *left_out]
    agreement = acc.agreement
    for key, what in (("logs_vs_prometheus", "log windows"), ("per_request_vs_prometheus", "per-request counts")):
        if getattr(agreement, key) is False:
            detail = agreement.details.get(key.split("_vs_")[0], "")
            warnings.append(f"{what} disagree with the Prometheus counts {detail}".rstrip())
    return Group(label, units, unit, total=prom, warnings=warnings, axes=axes, repeat=repeat)

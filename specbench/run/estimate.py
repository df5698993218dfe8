"""What a study will start and send, and how long that took here before (``run --dry-run``; pure).

Servers: the local executor's server groups (run/groups.py: cells differing only in load axes or in
a switchable head variant share one), one per cell on Ray. Each server is a cold start and warms up
once. Requests: every cell's load (``num_requests``; with ``load.until`` at most ``max_requests``)
plus each server's warm-up. Wall time: the last start-up and seconds per request measured on this
machine for the same server settings (run/timings.py); None where any part was never measured, so
an estimate never rests on a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specbench.run import timings
from specbench.run.cells import Cell


@dataclass
class ServerPlan:
    cells: list[str]
    key: str  # run/timings.py server key
    requests: int  # load + warm-up
    startup_s: float | None  # last measured start-up of these settings here; None: never measured
    load_s: float | None  # requests x last measured seconds per request; None: never measured


@dataclass
class Estimate:
    cells: int
    baseline_cells: int
    servers: list[ServerPlan]
    load_requests: int
    warmup_requests: int
    at_most: bool  # precision-driven load: a speculative cell stops at or before max_requests
    missing: list[str] = field(default_factory=list)  # what was never measured here, for the message
    assumed: tuple[float, float] | None = None  # wall time from the study's ``assume:`` where parts were never measured

    @property
    def requests(self) -> int:
        return self.load_requests + self.warmup_requests

    @property
    def startup_s(self) -> float | None:
        parts = [s.startup_s for s in self.servers]
        return None if None in parts else sum(p for p in parts if p is not None)

    @property
    def load_s(self) -> float | None:
        parts = [s.load_s for s in self.servers]
        return None if None in parts else sum(p for p in parts if p is not None)

    @property
    def wall_s(self) -> float | None:
        return None if self.startup_s is None or self.load_s is None else self.startup_s + self.load_s


def cell_load(study: Any, cell: Cell) -> tuple[int, int]:
    """(concurrency, max_tokens) the cell's load runs at: its load axes, else the study's (as
    :func:`specbench.run.timings.note_run_cell` keys what a run measured)."""
    return (
        int(cell.load.get("concurrency", study.load.concurrency)),
        int(cell.load.get("max_tokens", study.load.max_tokens)),
    )


def cell_requests(study: Any) -> int:
    """Requests of one cell's load: ``num_requests``, or the ``max_requests`` cap of a precision-driven load."""
    return study.load.num_requests if study.load.until is None else study.load.max_requests


def estimate(
    study: Any, cells: list[Cell], groups: list[list[Cell]], measured: dict[str, dict[str, Any]] | None = None
) -> Estimate:
    """The plan's counts and, from ``measured`` (run/timings.py ``read()``), its expected wall time."""
    measured = timings.read() if measured is None else measured
    n, warm = cell_requests(study), study.load.warmup_requests
    servers, missing = [], []
    for group in groups:
        key = timings.server_key(study.serve.model, group[0].spec)
        startup = (measured["startups"].get(key) or {}).get("startup_s")
        if startup is None:
            missing.append(f"start-up of {key}")
        load_s: float | None = 0.0
        for i, cell in enumerate(group):
            lkey = timings.load_key(key, *cell_load(study, cell))
            per = (measured["loads"].get(lkey) or {}).get("s_per_request")
            if per is None:
                missing.append(f"load of {lkey}")
                load_s = None
            elif load_s is not None:
                load_s += per * (n + (warm if i == 0 else 0))  # the warm-up runs before the first cell
        servers.append(ServerPlan([c.cell_id for c in group], key, n * len(group) + warm, startup, load_s))
    out = Estimate(
        cells=len(cells),
        baseline_cells=sum(c.is_baseline for c in cells),
        servers=servers,
        load_requests=n * len(cells),
        warmup_requests=warm * len(groups),
        at_most=study.load.until is not None,
        missing=list(dict.fromkeys(missing)),
    )
    if out.wall_s is None and study.assume is not None:
        out.assumed = assumed_wall(study, cells, groups)
    return out


def assumed_wall(study: Any, cells: list[Cell], groups: list[list[Cell]]) -> tuple[float, float]:
    """(low, high) wall time from the study's stated ``assume:``: every server's start-up, every
    request's output tokens at the assumed tok/s (the slow end of both gives the high figure)."""
    a = study.assume
    n, warm = cell_requests(study), study.load.warmup_requests
    tokens = sum(cell_load(study, c)[1] * n for c in cells) + sum(cell_load(study, g[0])[1] * warm for g in groups)
    starts = len(groups)
    return (
        starts * a.startup_s[0] + tokens / a.output_tok_per_s[1],
        starts * a.startup_s[1] + tokens / a.output_tok_per_s[0],
    )


def duration(seconds: float | None) -> str:
    """``95 s``, ``12 min``, ``3 h 05 min``; ``unknown`` for None."""
    if seconds is None:
        return "unknown"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"

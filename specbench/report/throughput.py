"""Throughput between two cells that differ in one axis: what MLA (or any target or draft setting)
does to output tok/s, beside what it does to acceptance.

The ratio is the speed-up's own (:func:`specbench.analysis.speedup.speedup`): output tok/s of the
second cell over the first's, each Σ output tokens / Σ e2e over its requests, with a t interval on
the log (jackknife over requests, paired by prompt where both cells sent the same), widened by the
between-run spread measured over reruns. Two cells of one run run minutes apart, so the machine's
load between them moves the ratio as it moves a speed-up: the widened interval decides whether the
change is significant; the within-run one is shown beside it. No-spec cells compare with no-spec
cells and speculative with speculative (a speculative cell against a no-spec one is a speed-up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from specbench.analysis.speedup import Speedup, speedup
from specbench.render import format as fmt
from specbench.render.tables import axis_name, cell_title

METRIC = "output_tok_per_s"


@dataclass
class ThroughputContrast:
    """``ratio``: the second cell (``cand``) over the first (``base``), cells differing in ``axis`` only."""

    axis: str
    base: str
    cand: str
    base_value: str
    cand_value: str
    others: dict[str, str]
    no_spec: bool
    ratio: Speedup

    @property
    def point(self) -> float:
        return self.ratio.point[METRIC]

    @property
    def interval(self) -> tuple[float, float]:
        return self.ratio.intervals[METRIC]

    @property
    def within(self) -> tuple[float, float]:
        return self.ratio.within.get(METRIC, (math.nan, math.nan))

    def significant(self) -> bool:
        lo, hi = self.interval
        return math.isfinite(lo) and math.isfinite(hi) and (lo > 1 or hi < 1)

    def head(self) -> str:
        """``MLA off vs on (no spec · norm on)``."""
        ctx = " · ".join(x for x in ("no spec" if self.no_spec else "", cell_title(self.others)) if x)
        return fmt.one_line(f"{axis_name(self.axis)} {self.cand_value} vs {self.base_value}") + (
            f" ({ctx})" if ctx else ""
        )

    def line(self) -> str:
        """One line: the ratio with its CI (between-run spread) and the verdict."""
        lo, hi = self.interval
        verdict = "significant" if self.significant() else "not significant"
        wlo, whi = self.within
        return (
            f"{self.head()}: output tok/s {fmt.num(self.point, 2)}× [{fmt.num(lo, 2)}, {fmt.num(hi, 2)}], {verdict} "
            f"(within this run [{fmt.num(wlo, 2)}, {fmt.num(whi, 2)}])"
        )


def throughput_contrasts(cells: list[Any], *, confidence: float, rerun_sd: float) -> list[ThroughputContrast]:
    """Every two cells (:class:`specbench.report.baseline_pairs.CellRequests`) of one repeat, both no-spec or
    both speculative, that differ in exactly one axis; the first value an axis takes in run order is
    the reference side, as in the acceptance contrasts."""
    first: dict[str, str] = {}
    for c in cells:
        for k, v in c.axes.items():
            first.setdefault(k, v)
    out = []
    for a, b in combinations(cells, 2):
        if a.repeat != b.repeat or a.is_baseline != b.is_baseline or set(a.axes) != set(b.axes):
            continue
        diff = [k for k in a.axes if a.axes[k] != b.axes[k]]
        if len(diff) != 1:
            continue
        axis = diff[0]
        base, cand = (b, a) if b.axes[axis] == first[axis] and a.axes[axis] != first[axis] else (a, b)
        try:
            ratio = speedup(cand.label, cand.rows, base.label, base.rows, confidence=confidence, rerun_sd=rerun_sd)
        except ValueError:  # a cell without finished requests: no ratio to show
            continue
        if not math.isfinite(ratio.point.get(METRIC, math.nan)):
            continue
        others = {k: v for k, v in base.axes.items() if k != axis and not (a.is_baseline and v == "none")}
        out.append(
            ThroughputContrast(
                axis, base.label, cand.label, base.axes[axis], cand.axes[axis], others, a.is_baseline, ratio
            )
        )
    return out


def throughput_rows(found: list[ThroughputContrast]) -> tuple[list[str], list[list[str]]]:
    """Header and cells of report's "Throughput between cells" table."""
    header = ["cells", "requests", "output tok/s ratio [CI, between runs]", "within this run", "significant"]
    rows = []
    for t in found:
        lo, hi = t.interval
        wlo, whi = t.within
        rows.append(
            [
                t.head(),
                f"{t.ratio.n_spec} vs {t.ratio.n_base}{' paired' if t.ratio.paired else ''}",
                f"{fmt.num(t.point, 2)}× [{fmt.num(lo, 2)}, {fmt.num(hi, 2)}]",
                f"[{fmt.num(wlo, 2)}, {fmt.num(whi, 2)}]",
                "yes" if t.significant() else "no",
            ]
        )
    return header, rows


def headline(found: list[ThroughputContrast]) -> list[ThroughputContrast]:
    """What the screen and the page lead with: every no-spec pair (the target setting's own effect
    on throughput, significant or not) and the speculative pairs whose change is significant."""
    return [t for t in found if t.no_spec or t.significant()]

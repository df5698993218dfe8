"""The calibration study's tables (docs/studies/calibration.md), computed from its committed runs:
per cell the configured truth beside the estimate and its 95% CI, the coverage summary, and the
speed-up against the configured acceptance length with the break-even AL. benchmarks/calibration.py
prints them; tests/testing/test_calibration_doc.py checks the page holds exactly what this prints.

Numbers are formatted as ``specbench report`` formats them (AL to 2 decimals, fractions to 3), so
the page's AL and p_i columns are also checked against the report (tests/test_study_docs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specbench.testing import BASELINES, CHECKOUT
from specbench.testing.truth import TruthCell, coverage, read_cells

CALIBRATION = BASELINES / "cpu-calibration"
SPEEDUP = BASELINES / "cpu-calibration-speedup"
SEEDS = CHECKOUT / "results" / "reruns" / "calibration-seeds"
FAMILIES = ("AL", "DAR", "p", "alpha")


def _al(v: float, lo: float, hi: float) -> str:
    return f"{v:.2f} [{lo:.2f}, {hi:.2f}]"


def _frac(v: float, lo: float, hi: float) -> str:
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def vllm_seed(c: TruthCell) -> int:
    """The vLLM ``--seed`` the cell's server ran with (vLLM's default, 0, unless a flag axis set it)."""
    seed = c.axes.get("flag:--seed")
    return 0 if seed is None else int(seed)


def position0_table(cells: list[TruthCell]) -> str:
    """p_0 against its configured rate, in binomial SEs, for every cell whose rate at 0 is fractional."""
    lines = [
        "| cell | vLLM seed | verify steps | configured p_0 | p_0 [95% CI] | error (binomial SEs) |",
        "|---|---|---|---|---|---|",
    ]
    for c in cells:
        r = c.rates[0]
        if not 0 < r < 1:
            continue
        z = (c.estimates["p0"] - r) / math.sqrt(r * (1 - r) / c.drafts)
        row = [cell_title(c), str(vllm_seed(c)), str(c.drafts), f"{r:g}", _frac(c.estimates["p0"], *c.intervals["p0"])]
        lines.append("| " + " | ".join([*row, f"{z:+.2f}"]) + " |")
    return "\n".join(lines)


def cell_title(c: TruthCell) -> str:
    """The cell's title as ``specbench report`` shows it (axis name, value; ' · ' between axes)."""
    parts = []
    for axis, value in c.axes.items():
        parts.append(f"{axis.split(':', 1)[-1]} {value}")
    return " · ".join(parts)


def _configured(c: TruthCell) -> str:
    rates = ", ".join(f"{r:g}" for r in c.rates)
    return f"AL {c.length:g} → {rates}" if c.length is not None else rates


def _covered(c: TruthCell) -> str:
    one = coverage([c], "p")
    return f"{one.covered}/{one.pairs}"


def cell_table(cells: list[TruthCell], drafts: str = "drafts") -> str:
    """One row per cell: configured rates (or AL target), truth AL, AL and p_i with their CIs.
    ``drafts`` names the drafts column (the page's report check matches rows by it)."""
    k = max(len(c.rates) for c in cells)
    head = ["cell", drafts, "configured p_i", "true AL", "AL", *[f"p_{i}" for i in range(k)]]
    head += ["p_i CIs cover", "log == /metrics"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        lo, hi = c.intervals["mean_acceptance_length"]
        row = [cell_title(c), str(c.drafts), _configured(c), f"{c.truth['mean_acceptance_length']:.2f}"]
        row.append(_al(c.estimates["mean_acceptance_length"], lo, hi))
        for i in range(k):
            key = f"p{i}"
            row.append(_frac(c.estimates[key], *c.intervals[key]) if key in c.estimates else "")
        row += [_covered(c), "yes" if c.log_equals_metrics and c.per_request_equals_metrics else "NO"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def coverage_table(cells: list[TruthCell]) -> str:
    """Per statistic family: pairs, share of CIs covering the truth, mean |error|."""
    lines = [
        "| statistic | (cell, statistic) pairs | 95% CI covers the truth | mean abs error |",
        "|---|---|---|---|",
    ]
    for family in FAMILIES:
        cov = coverage(cells, family)
        lines.append(
            f"| {family} | {cov.pairs} | {cov.covered}/{cov.pairs} ({cov.share:.1%}) | {cov.mean_abs_error:.4f} |"
        )
    inner = coverage(cells, "p", interior=True)
    lines.append(
        f"| p_i with 0 < truth < 1 | {inner.pairs} | {inner.covered}/{inner.pairs} ({inner.share:.1%}) "
        f"| {inner.mean_abs_error:.4f} |"
    )
    return "\n".join(lines)


@dataclass
class SpeedupPoint:
    cell: str
    length: float
    concurrency: int | None
    al: float  # measured
    speedup: float
    low: float
    high: float


def speedup_points(run_dir: Path = SPEEDUP) -> list[SpeedupPoint]:
    """Output tok/s speed-up over the no-speculation baseline per synthetic-length cell, as
    ``specbench report`` computes it (speedup.csv's ``speedup_output_tok_per_s`` and its CI)."""
    from specbench.report.assemble import build_report  # lazy: the report (pandas) only for the speed-up table

    report = build_report([Path(run_dir)])
    cells = {c.cell: c for c in read_cells(Path(run_dir))}
    out = []
    for s in report.studies[0].speedups:
        c = cells[s.cell]
        lo, hi = s.intervals["output_tok_per_s"]
        assert c.length is not None, s.cell
        point = s.point["output_tok_per_s"]
        out.append(SpeedupPoint(s.cell, c.length, c.concurrency, c.estimates["mean_acceptance_length"], point, lo, hi))
    return sorted(out, key=lambda p: (p.concurrency or 0, p.length))


def crossing(xs: list[float], ys: list[float], level: float = 1.0) -> float | None:
    """The first x where the piecewise-linear curve through (xs, ys) reaches ``level`` from below."""
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if y0 < level <= y1:
            return x0 + (level - y0) * (x1 - x0) / (y1 - y0)
    if ys and ys[0] >= level:
        return xs[0]
    return None


def break_even(points: list[SpeedupPoint]) -> dict[int | None, tuple[float | None, float | None, float | None]]:
    """Per concurrency: (break-even AL from the point estimates, from the CIs' upper ends (the
    smallest AL the data allow), from their lower ends (the AL past which it surely pays)); None
    where the curve never reaches 1.0 over the lengths run."""
    out = {}
    for conc in sorted({p.concurrency for p in points}, key=lambda c: c or 0):
        ps = [p for p in points if p.concurrency == conc]
        xs = [p.length for p in ps]
        out[conc] = (
            crossing(xs, [p.speedup for p in ps]),
            crossing(xs, [p.high for p in ps]),
            crossing(xs, [p.low for p in ps]),
        )
    return out


def _break_even_line(conc: int | None, marks: tuple[float | None, float | None, float | None], top: float) -> str:
    mid, early, late = marks
    if mid is None and early is None:
        return f"concurrency {conc}: no break-even up to AL {top:g}: the speed-up and its CI's upper end stay below 1.0"
    if mid is None:
        return f"concurrency {conc}: no break-even up to AL {top:g}; the CIs' upper ends reach 1.0 at AL {early:.2f}"
    last = f"AL {late:.2f}" if late is not None else f"nowhere up to AL {top:g}"
    return (
        f"concurrency {conc}: break-even at AL {mid:.2f} (interpolated); the CIs' upper ends reach 1.0 at "
        f"AL {early:.2f}, their lower ends {last}"
    )


def speedup_table(points: list[SpeedupPoint]) -> str:
    """Speed-up vs configured AL per concurrency, then the break-even line per concurrency."""
    lines = [
        "| concurrency | configured AL | measured AL | speed-up (output tok/s) [95% CI] |",
        "|---|---|---|---|",
    ]
    for p in points:
        lines.append(f"| {p.concurrency} | {p.length:g} | {p.al:.2f} | {p.speedup:.2f}× [{p.low:.2f}, {p.high:.2f}] |")
    lines.append("")
    top = max(p.length for p in points)
    for conc, marks in break_even(points).items():
        best = max((p for p in points if p.concurrency == conc), key=lambda p: p.speedup)
        lines.append(
            f"- {_break_even_line(conc, marks, top)}; highest speed-up {best.speedup:.2f}× "
            f"[{best.low:.2f}, {best.high:.2f}] at AL {best.length:g}"
        )
    return "\n".join(lines)


def all_tables(
    calibration: Path = CALIBRATION, speedup: Path | None = SPEEDUP, seeds: Path | None = SEEDS
) -> dict[str, str]:
    """The page's generated blocks by name (each between ``<!-- calibration.py NAME -->`` markers)."""
    cells = read_cells(calibration)
    out = {"cells": cell_table(cells), "coverage": coverage_table(cells)}
    length_cells = read_cells(speedup) if speedup is not None else []
    if speedup is not None:
        out["length-cells"] = cell_table(length_cells, drafts="verify steps")
        out["coverage-all"] = coverage_table(cells + length_cells)
        out["speedup"] = speedup_table(speedup_points(speedup))
    seed_cells = read_cells(seeds) if seeds is not None else []
    out["position0"] = position0_table(cells + length_cells + seed_cells)
    if seeds is not None:
        out["seed-cells"] = cell_table(seed_cells, drafts="verify steps")
    return out

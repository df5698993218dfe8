"""``compare --plot``: per cell, p_i of baseline and candidate (each side's per-cell CI: score
interval, jackknife design effect), and under it the difference Δp_i = cand − base with the CI the gate decides on and the gate's tolerance.

Two sides' intervals overlapping does not mean "no regression" (the gate judges the interval of
the difference), so the Δ panel is the one to read; the top panel shows where the levels are.
Data first (:func:`bands` from a cell's units), then drawing (Agg backend).
"""

from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from specbench.analysis.intervals import cell_intervals
from specbench.io import atomic_write_bytes
from specbench.records.counts import Counts
from specbench.render.plots.style import draw_ci

SIDES = (("baseline", "tab:blue", "o"), ("candidate", "tab:orange", "s"))


@dataclass
class Band:
    p: list[float]
    low: list[float]
    high: list[float]
    n_units: int


@dataclass
class DeltaRow:
    """Δp_i of one cell as the comparison computed it (the gate's interval) and the allowed harm."""

    delta: list[float | None]
    ci: list[tuple[float, float] | None]
    tolerance: list[float | None]  # allowed drop (>= 0); None where no gate checked the position
    status: list[str]  # gate status per position ("" when none)


def bands(units: list[Counts], *, confidence: float = 0.95) -> Band | None:
    """p_i and its per-side CI, :func:`cell_intervals` (degenerate with one unit: no interval)."""
    if not units:
        return None
    iv = cell_intervals(units, confidence=confidence)
    k = sum(1 for key in iv.point if key.startswith("p") and key[1:].isdigit())
    if not k:
        return None
    keys = [f"p{i}" for i in range(k)]
    return Band([iv.point[x] for x in keys], [iv[x][0] for x in keys], [iv[x][1] for x in keys], iv.n_units)


def delta_rows(cell) -> DeltaRow | None:
    """The per_position[i] rows of a :class:`~specbench.compare.cellwise.CellComparison`."""
    rows = {r.index: r for r in cell.rows if r.name.startswith("per_position[") and r.index is not None}
    if not rows:
        return None
    k = max(rows) + 1
    gated = {g.metric: g for g in cell.gates}
    out = DeltaRow([], [], [], [])
    for i in range(k):
        r = rows.get(i)
        g = gated.get(f"per_position[{i}]")
        out.delta.append(r.delta if r else None)
        out.ci.append(r.ci if r else None)
        out.tolerance.append(g.tolerance if g is not None and g.tolerance is not None else None)
        out.status.append(g.status if g is not None else "")
    return out


def draw_levels(ax, base: Band | None, cand: Band | None, names: tuple[str, str] = ("baseline", "candidate")) -> None:
    for band, (_, colour, marker), label, dx in (
        (base, SIDES[0], names[0], -0.06),
        (cand, SIDES[1], names[1], 0.06),
    ):
        if band is None:
            continue
        xs = [i + dx for i in range(len(band.p))]
        draw_ci(
            ax,
            xs,
            band.p,
            band.low,
            band.high,
            color=colour,
            marker=marker,
            linestyle="-",
            label=f"{label} ({band.n_units} units)",
        )
    ax.set_ylabel("$p_i$")
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)


def draw_delta(ax, d: DeltaRow | None) -> None:
    ax.axhline(0.0, color="black", linewidth=0.8)
    if d is None:
        ax.text(0.5, 0.5, "no Δ", transform=ax.transAxes, ha="center", va="center", color="gray")
        return
    k = len(d.delta)
    pts = [(i, v, ci) for i, (v, ci) in enumerate(zip(d.delta, d.ci)) if v is not None]
    colours = {"fail": "tab:red", "inconclusive": "goldenrod"}
    for i, v, ci in pts:
        lo, hi = ci if ci is not None else (math.nan, math.nan)
        draw_ci(
            ax,
            [i],
            [v * 100],
            [lo * 100],
            [hi * 100],
            color=colours.get(d.status[i], "black"),
            marker="D",
            linestyle="None",
        )
    for i, tol in enumerate(d.tolerance):
        if tol is not None:
            ax.hlines(-tol * 100, i - 0.35, i + 0.35, color="tab:red", linestyle="--", linewidth=1.2)
    ax.set_ylabel("Δ$p_i$ (pp)")
    ax.set_xticks(list(range(k)))
    ax.set_xlabel("draft position $i$")
    ax.grid(True, alpha=0.3)


def save_overlay(
    path: Path, panels: list[tuple[str, Band | None, Band | None, DeltaRow | None]], confidence: float = 0.95
) -> None:
    """:func:`overlay_figure`, written atomically as PNG/SVG/PDF (by the file's suffix)."""
    fig = overlay_figure(panels, confidence)
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    atomic_write_bytes(Path(path), buf.getvalue())


PANEL_TITLE_CHARS = 34  # what fits over one 3.6-inch panel at the medium font


def wrapped(title: str, width: int = PANEL_TITLE_CHARS) -> str:
    """A panel title on as many lines as it needs, broken between axis values (``MLA on · norm
    off``), never inside one: a long title would run into its neighbour's."""
    lines: list[str] = []
    for part in title.split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:  # one value longer than the width (a schedule axis's name and value) breaks at its spaces
            lines += textwrap.wrap(part, width, break_long_words=False) or [part]
    return "\n".join(lines)


def overlay_figure(
    panels: list[tuple[str, Band | None, Band | None, DeltaRow | None]],
    confidence: float = 0.95,
    *,
    names: tuple[str, str] = ("baseline", "candidate"),
    interval: str = "the gate uses",
    heading: str = "Per-position acceptance: levels (top) and the change the gate judges (bottom)",
):
    """Per matched cell a p_i panel over a Δ panel (Δ axes shared, so cells compare at a glance).
    ``names``: the two sides (compare: baseline and candidate; report: the reference cell and each
    other cell); ``interval`` what the Δ's CI is; the tolerance's legend entry only where one is drawn."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    panels = [p for p in panels if p[1] is not None or p[2] is not None] or [("no per-position data", None, None, None)]
    cols = min(len(panels), 4)
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(3.6 * cols + 0.6, 4.6 * rows + 0.8), layout="constrained")
    grid = fig.add_gridspec(2 * rows, cols, height_ratios=[2.2, 1] * rows)
    first_delta = None
    for n, (title, b, c, d) in enumerate(panels):
        r, col = divmod(n, cols)
        top = fig.add_subplot(grid[2 * r, col])
        bottom = fig.add_subplot(grid[2 * r + 1, col], sharex=top, sharey=first_delta)
        first_delta = first_delta or bottom
        if b is None and c is None:
            top.set_axis_off()
            bottom.set_axis_off()
            top.text(0.5, 0.5, title, ha="center")
            continue
        draw_levels(top, b, c, names)
        top.set_title(wrapped(title), fontsize="medium")
        top.tick_params(labelbottom=False)
        draw_delta(bottom, d)
        if col:
            top.set_ylabel("")
            bottom.set_ylabel("")
    level = f"{int(round(confidence * 100))}%"
    gated = any(t is not None for _, _, _, d in panels if d is not None for t in d.tolerance)
    handles = [
        Line2D([], [], color=SIDES[0][1], marker=SIDES[0][2], label=f"{names[0]} (its CI)"),
        Line2D([], [], color=SIDES[1][1], marker=SIDES[1][2], label=f"{names[1]} (its CI)"),
        Line2D(
            [],
            [],
            color="black",
            marker="D",
            linestyle="None",
            label=f"Δ = {names[1]} − {names[0]}, {level} CI {interval}" + (" (red: failed)" if gated else ""),
        ),
    ]
    if gated:
        handles.append(Line2D([], [], color="tab:red", linestyle="--", label="gate tolerance (a fail: whole CI below)"))
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize="small", frameon=False)
    # ~9 characters of the suptitle's font per inch: a two-panel figure takes a long heading on two lines
    fig.suptitle(textwrap.fill(heading, width=int(fig.get_figwidth() * 9), break_long_words=False))
    return fig

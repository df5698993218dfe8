"""Divergence and speed-up plots. Functions take data and an Axes (Agg backend, no pyplot state).

Divergence is an n x n heatmap (one row and one column per cell, named by its axis values), so
16 cells stay one picture instead of 120 rows of pairs; speed-up is a forest plot on a log axis
centred at 1x, where "faster" and "slower" are symmetric.
"""

from __future__ import annotations

import math
import textwrap
from typing import Callable

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from specbench.analysis.divergence import PairDivergence
from specbench.analysis.speedup import SPEEDUP_LABELS, SPEEDUPS, Speedup, speedups_method
from specbench.render.plots.style import draw_ci


def _same(label: str) -> str:
    return label


def divergence_matrix(pairs: list[PairDivergence]) -> tuple[list[str], np.ndarray, np.ndarray, list[list[str]]]:
    """Cells (first-seen order), identical share and median first divergence as symmetric n x n
    matrices (NaN: not paired, e.g. cells of two runs; diagonal: a cell with itself), and the
    ``identical/n`` text of each entry."""
    cells = list(dict.fromkeys([c for p in pairs for c in (p.a, p.b)]))
    idx = {c: i for i, c in enumerate(cells)}
    n = len(cells)
    share, median = np.full((n, n), np.nan), np.full((n, n), np.nan)
    text = [["" for _ in range(n)] for _ in range(n)]
    for p in pairs:
        i, j = idx[p.a], idx[p.b]
        share[i, j] = share[j, i] = p.identical_share
        median[i, j] = median[j, i] = float(np.median(p.positions)) if p.positions else np.nan
        text[i][j] = text[j][i] = f"{p.identical}/{p.n}"
    return cells, share, median, text


def _heatmap(
    ax: Axes, matrix: np.ndarray, labels: list[str], cmap: str, vmin: float, vmax: float, text: list[list[str]]
) -> AxesImage:
    import matplotlib

    colours = matplotlib.colormaps[cmap].with_extremes(bad="#eeeeee")
    im = ax.imshow(np.ma.masked_invalid(matrix), cmap=colours, vmin=vmin, vmax=vmax)
    n = len(labels)
    small = CELL_PT
    for i in range(n):
        for j in range(n):
            if i == j:
                ax.text(j, i, "—", ha="center", va="center", color="gray", fontsize=small)
            elif text[i][j]:
                v = matrix[i, j]
                dark = not math.isnan(v) and (v - vmin) / ((vmax - vmin) or 1) > 0.6
                ax.text(j, i, text[i][j], ha="center", va="center", fontsize=small, color="white" if dark else "black")
    ax.set_xticks(range(n), labels, rotation=35, ha="right", fontsize=small)
    ax.set_yticks(range(n), labels, fontsize=small)
    ax.tick_params(length=0)
    return im


# Text in a heatmap cell and its labels (9 pt); past SIDE_BY_SIDE cells the two heatmaps stack, at most
# MAX_WIDTH_IN wide: report's page shows a figure at most 1148 px (~12 in) wide, so its text stays >= 8 pt.
CELL_PT = 9
SIDE_BY_SIDE = 4
MAX_WIDTH_IN = 11.9


def divergence_figure(pairs: list[PairDivergence], title: Callable[[str], str] = _same) -> Figure:
    """Left: share of prompts whose greedy outputs are identical, per pair of cells; right: the
    median position where they first differ."""
    cells, share, median, text = divergence_matrix(pairs)
    labels = [title(c) for c in cells]
    n = len(cells)
    side = 2.2 + 0.6 * n
    if n > SIDE_BY_SIDE:  # stacked: side by side the figure was wider than the page and shrank its text to 4-6 pt
        fig = Figure(figsize=(min(side + 2.5, MAX_WIDTH_IN), 2 * side + 1.5), layout="constrained")
        ax_s, ax_m = fig.subplots(2, 1)
    else:
        fig = Figure(figsize=(2 * side + 2.5, side + 1.2), layout="constrained")
        ax_s, ax_m = fig.subplots(1, 2)
    im = _heatmap(ax_s, share, labels, "Blues", 0.0, 1.0, text)
    fig.colorbar(im, ax=ax_s, shrink=0.8, label="identical share")
    ax_s.set_title("prompts with identical greedy output (identical / prompts)", fontsize="medium")
    unit = pairs[0].unit if pairs else "token"
    top = float(np.nanmax(median)) if np.isfinite(median).any() else 1.0
    mtext = [
        [("" if math.isnan(median[i, j]) else f"{median[i, j]:g}") if i != j else "" for j in range(n)]
        for i in range(n)
    ]
    im = _heatmap(ax_m, median, labels, "Oranges", 0.0, max(top, 1.0), mtext)
    fig.colorbar(im, ax=ax_m, shrink=0.8, label=f"{unit} position")
    ax_m.set_title(f"median {unit} position where outputs first differ", fontsize="medium")
    if n <= SIDE_BY_SIDE:  # side by side: the left panel names the rows
        ax_m.set_yticks(range(n), [""] * n)
    fig.suptitle("Greedy output divergence between cells (same prompts, paired by request)")
    return fig


KIND_STYLE = {
    "output_tok_per_s": ("tab:blue", "o"),
    "tpot": ("tab:green", "s"),
    "e2e": ("tab:purple", "^"),
    "decomposition": ("tab:orange", "D"),
}


def plot_speedups(
    ax: Axes,
    speedups: list[Speedup],
    title: Callable[[str], str] = _same,
    kinds: tuple[str, ...] = SPEEDUPS,
    limits: tuple[float, float] | None = None,
) -> None:
    """Forest plot: one row per cell, each speed-up of ``kinds`` with its CI on a log axis; 1x
    marked; ``limits``: the axis's ends (panels of one figure share them), else the data's."""
    offsets = np.linspace(-0.27, 0.27, len(kinds)) if len(kinds) > 1 else np.zeros(1)
    for key, dy in zip(kinds, offsets):
        colour, marker = KIND_STYLE[key]
        ys, xs, lo, hi = [], [], [], []
        for row, s in enumerate(speedups):
            v = s.point[key]
            if v is None or not math.isfinite(v) or v <= 0:
                continue
            ys.append(row + dy)
            xs.append(v)
            lo.append(s.intervals[key][0])
            hi.append(s.intervals[key][1])
        if xs:
            draw_ci(
                ax,
                ys,
                xs,
                lo,
                hi,
                horizontal=True,
                color=colour,
                marker=marker,
                linestyle="None",
                label=SPEEDUP_LABELS[key],
            )
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    low, high = (math.log(x) for x in (limits or speedup_limits(speedups, kinds)))
    ax.set_xlim(math.exp(low), math.exp(high))
    span = max(abs(low), abs(high))
    ax.xaxis.set_major_locator(FixedLocator([x for x in spaced_ticks(span) if low <= math.log(x) <= high]))
    for side, text, align in ((-1, "← slower", "right"), (1, "faster →", "left")):
        ax.annotate(
            text,
            xy=(1.0, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(side * 4, -3),
            textcoords="offset points",
            ha=align,
            va="top",  # in the band kept free above the first row (ylim below)
            fontsize="small",
            color="0.3",
        )
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}×"))
    ax.set_yticks(range(len(speedups)), [title(s.cell) for s in speedups])
    ax.set_ylim(len(speedups) - 0.5, -0.95)  # a free band on top for the slower | faster labels
    ax.set_xlabel("speed-up over the no-speculation baseline (log scale; < 1× slower, > 1× faster)")
    ax.grid(True, axis="x", alpha=0.3)


SPEEDUP_TICKS = (0.25, 0.33, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0)


def spaced_ticks(span: float, min_gap: float = 0.1) -> list[float]:
    """Speed-up ticks inside ``[e^-span, e^span]`` (log axis), 1× always, outward from it keeping a
    tick only ``min_gap`` of the axis width (in log units) or more from the last one kept, so no two
    labels ("0.67×0.8×") run into each other however wide the axis is."""
    inside = [t for t in SPEEDUP_TICKS if math.exp(-span) <= t <= math.exp(span)]
    gap = min_gap * 2 * span
    kept = [1.0]
    for side in (sorted(t for t in inside if t > 1), sorted((t for t in inside if t < 1), reverse=True)):
        last = 1.0
        for t in side:
            if abs(math.log(t) - math.log(last)) >= gap:
                kept.append(t)
                last = t
    return sorted(kept)


def speedup_limits(speedups: list[Speedup], kinds: tuple[str, ...] = SPEEDUPS) -> tuple[float, float]:
    """The log axis's ends: the data's own range (1x always in it), padded, with room either side of
    1x for its slower | faster label; no empty decade on either side."""
    values = [1.0] + [
        x
        for s in speedups
        for key in kinds
        if s.point[key] is not None
        for x in (s.point[key], *s.intervals[key])
        if x is not None and math.isfinite(x) and x > 0
    ]
    low, high = math.log(min(values)), math.log(max(values))
    pad = max(high - low, math.log(1.25)) * 0.06
    low, high = low - pad, high + pad
    room = 0.12 * (high - low)
    return math.exp(min(low, -room)), math.exp(max(high, room))


# Past this many intervals a forest plot is a wall of near-identical bars (48 in seed-questions'
# 12 cells x 4 estimates): it then shows each cell's measured tok/s speed-up only (the estimate
# the report's answers read; all four are in speedup.csv) and, past this many cells, stacks panels
# of at most this many rows on one shared axis.
MAX_INTERVALS = 12
HEADLINE = ("output_tok_per_s",)


def speedup_panels(speedups: list[Speedup]) -> tuple[tuple[str, ...], list[list[Speedup]]]:
    """Which estimates the figure draws and its panels' cells, so no panel carries more than
    :data:`MAX_INTERVALS` intervals."""
    kinds = SPEEDUPS if len(speedups) * len(SPEEDUPS) <= MAX_INTERVALS else HEADLINE
    per_panel = max(1, MAX_INTERVALS // len(kinds))
    n = max(1, math.ceil(len(speedups) / per_panel))
    size = math.ceil(len(speedups) / n) if speedups else 1  # panels of even size
    return kinds, [speedups[i : i + size] for i in range(0, len(speedups), size)] or [[]]


def speedup_figure(speedups: list[Speedup], title: Callable[[str], str] = _same) -> Figure:
    kinds, panels = speedup_panels(speedups)
    rows = [max(len(p), 1) for p in panels]
    per_row = 0.75 if len(kinds) > 1 else 0.42
    fig = Figure(figsize=(10, 1.8 + per_row * sum(rows) + 0.5 * (len(panels) - 1)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True, height_ratios=rows)[:, 0]
    limits = speedup_limits(speedups, kinds)
    for ax, cells in zip(axes, panels):
        plot_speedups(ax, cells, title, kinds, limits)
        if ax is not axes[-1]:
            ax.set_xlabel("")
    head = (
        "Speed-up of speculative cells over their baseline: measured, and AL ÷ step cost\n"
        if kinds == SPEEDUPS
        else f"Speed-up of speculative cells over their baseline: {SPEEDUP_LABELS[kinds[0]]}\n"
        f"({len(speedups)} cells: the TPOT, end-to-end and AL ÷ step cost estimates of each are in speedup.csv)\n"
    )
    # the method under the figure's title, centred on the figure (long cell names leave the axes
    # narrow: a title over the axes ran past the right edge)
    fig.suptitle(
        head + "error bars: " + textwrap.fill(speedups_method(speedups), 110),
        fontsize="small",
    )
    fig.legend(
        *axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize="small", frameon=False
    )
    return fig

"""Acceptance plots. Functions take data (the frames of :mod:`specbench.analysis.frames`, or a group's units) and an Axes;
figures are built without pyplot's global state and rendered with the Agg backend."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from specbench.analysis.intervals import cumulative_intervals
from specbench.io import atomic_write_bytes
from specbench.records.counts import Counts
from specbench.render.plots.style import Encoding, draw_ci, encode, shared_legend

_STATS = {
    "p": ("unconditional $p_i$", r"$p_i$ = accepted at position $i$ / drafts"),
    "a": (r"conditional $\alpha_i$", r"$\alpha_i = p_i / p_{i-1}$, $\alpha_0 = p_0$"),
}


def _positions(summary: pd.DataFrame, prefix: str) -> list[int]:
    out: list[int] = []
    while f"{prefix}{len(out)}" in summary.columns:
        out.append(len(out))
    return out


def _encoding(summary: pd.DataFrame, enc: Encoding | None) -> Encoding:
    return enc if enc is not None else encode([(str(lab), None) for lab in summary["label"]])


# A point whose CI is wider than this says little (alpha_2 after few accepted alpha_1 tokens: [0, 0.86]):
# drawn hollow and faded, so it neither hides the firm points nor reads as a finding.
WIDE_CI = 0.5


def _wide(lo: float | None, hi: float | None) -> bool:
    return lo is None or hi is None or math.isnan(lo) or math.isnan(hi) or hi - lo > WIDE_CI


def _draw_weighted(ax: Axes, xs: list, ys: list, lo: list, hi: list, style) -> None:
    """The group's line through its firm points, filled, with their bars; wide ones hollow and
    faded, unconnected (a line into them would draw the eye to them)."""
    firm = [k for k in range(len(xs)) if not _wide(lo[k], hi[k])]
    few = [k for k in range(len(xs)) if _wide(lo[k], hi[k])]
    if firm:
        pick = [xs[k] for k in firm], [ys[k] for k in firm], [lo[k] for k in firm], [hi[k] for k in firm]
        draw_ci(ax, *pick, style, label=style.title)
    else:  # nothing firm: still one legend entry for the group
        ax.plot([], [], label=style.title, **style.kw())
    if few:
        kw = style.kw()
        draw_ci(
            ax,
            [xs[k] for k in few],
            [ys[k] for k in few],
            [lo[k] for k in few],
            [hi[k] for k in few],
            None,
            color=kw["color"],
            marker=kw["marker"],
            linestyle="none",
            markerfacecolor="white",
            alpha=0.35,
            capsize=2,
            elinewidth=0.8,
        )


def plot_per_position(ax: Axes, summary: pd.DataFrame, stat: str = "p", enc: Encoding | None = None) -> None:
    """One line per group over draft positions, its per-cell CI (score interval, jackknife design
    effect) as error bars; colour, line style and marker from ``enc`` (the study's axes; one colour per group without one).

    ``summary`` is :func:`~specbench.analysis.frames.summary_frame` output; ``stat`` is "p"
    (unconditional p_i) or "a" (conditional alpha_i).
    """
    ylabel, _ = _STATS[stat]
    enc = _encoding(summary, enc)
    positions = _positions(summary, stat)
    n = max(len(summary), 1)
    faint = False
    for j, (_, row) in enumerate(summary.iterrows()):
        xs, ys, lo, hi = [], [], [], []
        for i in positions:
            v = row[f"{stat}{i}"]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            # small horizontal offset per group so overlapping error bars stay readable
            xs.append(i + (j - (n - 1) / 2) * 0.05)
            ys.append(v)
            lo.append(row[f"{stat}{i}_ci_low"])
            hi.append(row[f"{stat}{i}_ci_high"])
        if xs:
            style = enc.style(str(row["label"]), j)
            _draw_weighted(ax, xs, ys, lo, hi, style)
            faint = faint or any(_wide(a, b) for a, b in zip(lo, hi))
    if faint:
        ax.text(
            0.99,
            0.99,
            f"hollow, faded: CI wider than {WIDE_CI:g} (few drafts reached the position)",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize="small",  # x-small (6.9 pt) read below 8 pt on the page
            color="0.35",
        )
    ax.set_xticks(positions)
    ax.set_xlabel("draft position $i$")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    _note_if_empty(ax, "no per-position counts in the input")


# At most this many cumulative points per group: a day-long log has tens of thousands of windows,
# and a point per window costs time and memory (and ink) without showing more.
MAX_CUMULATIVE_POINTS = 200


def plot_al_over_time(
    ax: Axes,
    groups: dict[str, list[Counts]],
    summary: pd.DataFrame | None = None,
    enc: Encoding | None = None,
    confidence: float = 0.95,
) -> None:
    """Cumulative AL per group over its units in order (log windows in time order, a run's requests
    in id order), with its CI as a shaded band: where it settles is the group's AL, how fast it
    settles is how much the order mattered. Each point is AL pooled over the first n units with the
    per-cell interval over them (:func:`~specbench.analysis.intervals.cumulative_intervals`), so
    the last is the interval of the group's row in the table. ``groups``: label -> units, the
    units the table's CI runs over."""
    labels = [label for label, units in groups.items() if units]
    enc = enc if enc is not None else encode([(str(lab), None) for lab in labels])
    points: list[float] = []
    for j, label in enumerate(labels):
        cum = cumulative_intervals(groups[label], "mean_acceptance_length", confidence, MAX_CUMULATIVE_POINTS)
        style = enc.style(str(label), j)
        xs, ys = [c[0] for c in cum], [c[1] for c in cum]
        # the interval as a band, not a bar per point: one group's band reads at a glance beside others'
        lo = [math.nan if c[2] is None else c[2] for c in cum]
        hi = [math.nan if c[3] is None else c[3] for c in cum]
        # from the third point on: the first intervals (1-2 units) span the axis and would blanket the rest
        ax.fill_between(xs[2:], lo[2:], hi[2:], color=style.color, alpha=0.08, linewidth=0)
        ax.plot(xs[2:], lo[2:], xs[2:], hi[2:], color=style.color, linestyle=style.linestyle, linewidth=0.6, alpha=0.5)
        ax.plot(
            xs,
            ys,
            color=style.color,
            linestyle=style.linestyle,
            marker=style.marker,
            markersize=2.5,
            linewidth=1.5,
            label=style.title,
        )
        points += [c[1] for c in cum if not math.isnan(c[1])]
    if points:  # the first few intervals are wide (2-3 units): the points set the scale, AL >= 1
        ax.set_ylim(max(0.95, min(points) - 0.6), max(points) + 0.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    unit = "units"
    if summary is not None and "unit" in summary.columns and summary["unit"].nunique() == 1:
        unit = f"{summary['unit'].iloc[0]}s"
    ax.set_xlabel(f"{unit} so far (log windows in time order; a run's requests in id order)")
    ax.set_ylabel("cumulative AL = 1 + ΣA / ΣD")
    ax.grid(True, alpha=0.3)
    _note_if_empty(ax, "no windows with counts in the input")


def _note_if_empty(ax: Axes, note: str) -> None:
    if not ax.get_legend_handles_labels()[0]:  # an empty panel must say why, not look like a rendering bug
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", color="gray")


def per_position_figure(
    summary: pd.DataFrame,
    confidence: float = 0.95,
    enc: Encoding | None = None,
    facets: list[tuple[str, list[str]]] | None = None,
) -> Figure:
    """Two panels, unconditional p_i and conditional alpha_i per draft position, one legend;
    ``facets`` ([(title, group labels)]): a row of the two panels per facet."""
    enc = _encoding(summary, enc)
    rows = facets or [("", list(summary["label"]) if "label" in summary else [])]
    fig = Figure(figsize=(11, 1 + 4.2 * len(rows)) if facets else (11, 5), layout="constrained")
    grid = fig.subplots(len(rows), 2, sharey=True, squeeze=False)
    for (title, labels), (ax_p, ax_a) in zip(rows, grid):
        part = summary[summary["label"].isin(labels)].reset_index(drop=True) if facets else summary
        plot_per_position(ax_p, part, "p", enc)
        plot_per_position(ax_a, part, "a", enc)
        head = f"{title}: " if title else ""
        ax_p.set_title(head + _STATS["p"][1], fontsize="medium")
        ax_a.set_title(head + _STATS["a"][1], fontsize="medium")
    fig.suptitle(f"Acceptance per draft position (error bars: {confidence:.0%} CI over the units; method: summary.md)")
    shared_legend(fig, enc)
    return fig


def al_over_time_figure(
    groups: dict[str, list[Counts]],
    summary: pd.DataFrame | None = None,
    enc: Encoding | None = None,
    confidence: float = 0.95,
) -> Figure:
    labels = [label for label, units in groups.items() if units]
    enc = enc if enc is not None else encode([(str(lab), None) for lab in labels])
    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    plot_al_over_time(ax, groups, summary, enc, confidence)
    ax.set_title(
        "AL pooled over the units so far (includes the bonus token)\n"
        f"shaded: {confidence:.0%} CI from the third unit on (at the last point, the table's)",
        fontsize="medium",
    )
    fig.suptitle("Acceptance length as units accumulate")
    shared_legend(fig, enc)
    return fig


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """Write ``stem``.png and ``stem``.svg atomically; returns the paths.

    The figure is laid out once, for the PNG; the SVG keeps those positions (laying it out again
    costs a quarter of the figure's time and moves its text by under a point)."""
    out = []
    options: tuple[tuple[str, dict[str, Any]], ...] = (("png", {"dpi": 120}), ("svg", {}))
    for ext, kw in options:
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, **kw)
        fig.set_layout_engine("none")  # keep the layout just computed
        path = Path(f"{stem}.{ext}")
        atomic_write_bytes(path, buf.getvalue())
        out.append(path)
    return out

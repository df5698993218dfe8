"""Acceptance plots. Functions take data (the frames of :mod:`specbench.analysis.frames`) and an Axes;
figures are built without pyplot's global state and rendered with the Agg backend."""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on CI machines; must precede any pyplot import elsewhere

import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from specbench.io import atomic_write_bytes  # noqa: E402

_STATS = {
    "p": ("acceptance (unconditional p_i)", "p_i = accepted at position i / drafts"),
    "a": ("acceptance (conditional alpha_i)", "alpha_i = p_i / p_(i-1), alpha_0 = p_0"),
}


def _positions(summary: pd.DataFrame, prefix: str) -> list[int]:
    out = []
    while f"{prefix}{len(out)}" in summary.columns:
        out.append(len(out))
    return out


def plot_per_position(ax: Axes, summary: pd.DataFrame, stat: str = "p") -> None:
    """One line per group over draft positions, with its bootstrap CI as error bars.

    ``summary`` is :func:`~specbench.analysis.frames.summary_frame` output; ``stat`` is "p"
    (unconditional p_i) or "a" (conditional alpha_i).
    """
    ylabel, _ = _STATS[stat]
    positions = _positions(summary, stat)
    n = max(len(summary), 1)
    for j, (_, row) in enumerate(summary.iterrows()):
        xs, ys, lo, hi = [], [], [], []
        for i in positions:
            v = row[f"{stat}{i}"]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            # small horizontal offset per group so overlapping error bars stay readable
            xs.append(i + (j - (n - 1) / 2) * 0.06)
            ys.append(v)
            lo.append(v - row[f"{stat}{i}_ci_low"] if not math.isnan(row[f"{stat}{i}_ci_low"]) else 0.0)
            hi.append(row[f"{stat}{i}_ci_high"] - v if not math.isnan(row[f"{stat}{i}_ci_high"]) else 0.0)
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, label=str(row["label"]))
    ax.set_xticks(positions)
    ax.set_xlabel("draft position")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    _legend_or_note(ax, "no per-position counts in the input")


def plot_al_over_time(ax: Axes, windows: pd.DataFrame, summary: pd.DataFrame | None = None) -> None:
    """Per-window AL (each window's own 1 + A/D) in order, per group; dashed: the group's pooled AL.

    ``windows`` is :func:`~specbench.analysis.frames.window_frame` output.
    """
    for label, df in windows.groupby("label", sort=False):
        line = ax.plot(df["window"], df["mean_acceptance_length"], marker=".", label=str(label))[0]
        if summary is not None:
            pooled = summary.loc[summary["label"] == label, "mean_acceptance_length"]
            if len(pooled) and not math.isnan(pooled.iloc[0]):
                ax.axhline(pooled.iloc[0], color=line.get_color(), linestyle="--", linewidth=1, alpha=0.7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("window (log interval or request, in order)")
    ax.set_ylabel("mean acceptance length (1 + A/D)")
    ax.grid(True, alpha=0.3)
    _legend_or_note(ax, "no windows with counts in the input")


def _legend_or_note(ax: Axes, note: str) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    else:  # an empty panel must say why, not look like a rendering bug
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", color="gray")


def per_position_figure(summary: pd.DataFrame, confidence: float = 0.95) -> Figure:
    """Two panels: unconditional p_i and conditional alpha_i per draft position."""
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax_p, ax_a = fig.subplots(1, 2)
    plot_per_position(ax_p, summary, "p")
    plot_per_position(ax_a, summary, "a")
    ax_p.set_title(f"unconditional: {_STATS['p'][1]}", fontsize="medium")
    ax_a.set_title(f"conditional: {_STATS['a'][1]}", fontsize="medium")
    fig.suptitle(
        f"Speculative-decoding acceptance per draft position (error bars: {confidence:.0%} bootstrap CI)"
    )
    return fig


def al_over_time_figure(windows: pd.DataFrame, summary: pd.DataFrame | None = None) -> Figure:
    fig = Figure(figsize=(9, 4.5), layout="constrained")
    ax = fig.subplots()
    plot_al_over_time(ax, windows, summary)
    ax.set_title("Mean acceptance length per window (dashed: pooled over all windows; includes the bonus token)",
                 fontsize="medium")
    fig.suptitle("Speculative-decoding acceptance over time")
    return fig


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """Write ``stem``.png and ``stem``.svg atomically; returns the paths."""
    out = []
    for ext, kw in (("png", {"dpi": 120}), ("svg", {})):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, **kw)
        path = Path(f"{stem}.{ext}")
        atomic_write_bytes(path, buf.getvalue())
        out.append(path)
    return out

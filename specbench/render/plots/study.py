"""Divergence and speed-up plots. Functions take data and an Axes (Agg backend, no pyplot state)."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

import specbench.render.plots.acceptance  # noqa: F401  (selects the Agg backend before any figure is drawn)
from specbench.analysis.divergence import PairDivergence
from specbench.analysis.speedup import SPEEDUP_LABELS, SPEEDUPS, Speedup


def _pair_label(p: PairDivergence) -> str:
    return f"{p.a}\nvs {p.b}"


def plot_identical_share(ax: Axes, pairs: list[PairDivergence]) -> None:
    """One horizontal bar per pair of cells: share of prompts whose outputs are identical."""
    ys = np.arange(len(pairs))
    shares = [p.identical_share for p in pairs]
    ax.barh(ys, shares, color="tab:blue", alpha=0.8)
    for y, p in zip(ys, pairs):
        ax.text(min(p.identical_share, 1.0) + 0.01, y, f"{p.identical}/{p.n}", va="center", fontsize="small")
    ax.set_yticks(ys, [_pair_label(p) for p in pairs], fontsize="x-small")
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("share of prompts with identical greedy output")
    ax.grid(True, axis="x", alpha=0.3)


def plot_first_divergence(ax: Axes, pairs: list[PairDivergence]) -> None:
    """First-divergence positions per pair (one dot per diverging prompt, jittered vertically)."""
    rng = np.random.default_rng(0)  # fixed jitter: the same data gives the same picture
    unit = "token"
    for y, p in enumerate(pairs):
        pos = p.positions
        unit = p.unit
        if pos:
            ax.scatter(pos, y + rng.uniform(-0.2, 0.2, len(pos)), s=14, alpha=0.7, color="tab:red")
            ax.plot([float(np.median(pos))] * 2, [y - 0.3, y + 0.3], color="black", linewidth=2)
    ax.set_yticks(range(len(pairs)), [""] * len(pairs))
    ax.set_ylim(len(pairs) - 0.5, -0.5)
    ax.set_xlabel(f"first divergence ({unit} position; black: median)")
    ax.grid(True, axis="x", alpha=0.3)
    if not any(p.positions for p in pairs):
        ax.text(0.5, 0.5, "no prompt diverges", transform=ax.transAxes, ha="center", va="center", color="gray")


def divergence_figure(pairs: list[PairDivergence]) -> Figure:
    fig = Figure(figsize=(11, 1.2 + 0.55 * max(len(pairs), 1)), layout="constrained")
    ax_s, ax_p = fig.subplots(1, 2, sharey=False, width_ratios=[1, 1.3])
    plot_identical_share(ax_s, pairs)
    plot_first_divergence(ax_p, pairs)
    fig.suptitle("Greedy output divergence between cells (same prompts, paired by request)")
    return fig


def plot_speedups(ax: Axes, speedups: list[Speedup]) -> None:
    """Grouped bars per cell: measured speed-ups and the decomposition, with CI error bars; 1 = no change."""
    width = 0.8 / len(SPEEDUPS)
    colors = {"output_tok_per_s": "tab:blue", "tpot": "tab:cyan", "e2e": "tab:green", "decomposition": "tab:orange"}
    xs = np.arange(len(speedups))
    for j, key in enumerate(SPEEDUPS):
        vals = [s.point[key] for s in speedups]
        lo = [v - s.intervals[key][0] for v, s in zip(vals, speedups)]
        hi = [s.intervals[key][1] - v for v, s in zip(vals, speedups)]
        err = np.nan_to_num([lo, hi], nan=0.0)
        ax.bar(xs + (j - (len(SPEEDUPS) - 1) / 2) * width, np.nan_to_num(vals, nan=0.0), width, yerr=err,
               capsize=3, color=colors[key], label=SPEEDUP_LABELS[key],
               hatch="//" if key == "decomposition" else None, edgecolor="white" if key == "decomposition" else None)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_xticks(xs, [s.cell for s in speedups], fontsize="small", rotation=15, ha="right")
    ax.set_ylabel("speed-up over the no-speculation baseline (×)")
    top = max([s.intervals[k][1] for s in speedups for k in SPEEDUPS if not math.isnan(s.intervals[k][1])] + [1.2])
    ax.set_ylim(0, top * 1.1)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", ncols=2)


def speedup_figure(speedups: list[Speedup]) -> Figure:
    fig = Figure(figsize=(max(7.0, 1.6 * len(speedups) + 3), 4.8), layout="constrained")
    ax = fig.subplots()
    plot_speedups(ax, speedups)
    conf = f"{speedups[0].confidence:.0%}" if speedups else "95%"
    ax.set_title(f"> 1: faster with speculation; error bars: {conf} bootstrap CI over requests", fontsize="medium")
    fig.suptitle("Speed-up of speculative cells over their baseline: measured, and AL ÷ step cost")
    return fig

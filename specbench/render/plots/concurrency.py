"""Speed-up vs concurrency, for studies with a ``load:concurrency`` axis.

Speculation spends spare compute on drafts: at concurrency 1 the verify step is nearly free, at
high concurrency the batch fills the machine and each verify step costs more plain decode steps.
This figure shows where the crossover is: the measured speed-ups (with their bootstrap CIs) against
concurrency, one line per combination of the other axes, and beside it why (AL and the verify
step's cost in plain decode steps; speculation breaks even where the two meet).
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

import specbench.render.plots  # noqa: F401  (selects the Agg backend before any figure is drawn)
from specbench.analysis.speedup import SPEEDUP_LABELS, Speedup
from specbench.analysis.where_it_pays import where_it_pays
from specbench.render.plots.curves import save_figure
from specbench.render.plots.style import noted

AXIS = "concurrency"  # axis_label("load:concurrency")
SHOWN = ("output_tok_per_s", "tpot")


def concurrency_series(
    speedups: list[Speedup], cell_axes: dict[str, dict[str, str]]
) -> dict[str, list[tuple[int, Speedup]]]:
    """Speed-ups grouped by the cell's other axes (the series label), sorted by concurrency.
    Cells without a concurrency axis value are left out."""
    series: dict[str, list[tuple[int, Speedup]]] = {}
    for s in speedups:
        axes = cell_axes.get(s.cell) or {}
        try:
            conc = int(axes[AXIS])
        except (KeyError, ValueError):
            continue
        label = ", ".join(f"{k}={v}" for k, v in sorted(axes.items()) if k != AXIS) or "all cells"
        series.setdefault(label, []).append((conc, s))
    return {k: sorted(v, key=lambda t: t[0]) for k, v in series.items()}


def _x_axis(ax: Axes, series: dict[str, list[tuple[int, Speedup]]]) -> None:
    xs = sorted({c for pts in series.values() for c, _ in pts})
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel("concurrency (requests in flight)")


def _err(points: list[tuple[int, Speedup]], key: str) -> tuple[list[float], np.ndarray]:
    vals = [s.point[key] for _, s in points]
    lo = [v - s.intervals[key][0] for v, (_, s) in zip(vals, points)]
    hi = [s.intervals[key][1] - v for v, (_, s) in zip(vals, points)]
    return vals, np.nan_to_num([lo, hi], nan=0.0)


def plot_speedup_vs_concurrency(ax: Axes, series: dict[str, list[tuple[int, Speedup]]]) -> None:
    styles = {"output_tok_per_s": "-o", "tpot": "--s"}
    for i, (label, points) in enumerate(series.items()):
        xs = [c for c, _ in points]
        for key in SHOWN:
            vals, err = _err(points, key)
            ax.errorbar(
                xs, vals, yerr=err, fmt=styles[key], color=f"C{i}", capsize=3, label=f"{label}: {SPEEDUP_LABELS[key]}"
            )
    ax.axhline(1.0, color="black", linewidth=1, linestyle=":")
    _x_axis(ax, series)
    ax.set_ylabel("speed-up over the baseline at the same concurrency (×)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")


def plot_why(ax: Axes, series: dict[str, list[tuple[int, Speedup]]]) -> None:
    for i, (label, points) in enumerate(series.items()):
        xs = [c for c, _ in points]
        ax.plot(
            xs,
            [s.spec.get("mean_acceptance_length", math.nan) for _, s in points],
            "-o",
            color=f"C{i}",
            label=f"{label}: acceptance length",
        )
        vals, err = _err(points, "cost_ratio")
        ax.errorbar(
            xs, vals, yerr=err, fmt="--^", color=f"C{i}", capsize=3, label=f"{label}: verify step cost (plain steps)"
        )
    _x_axis(ax, series)
    ax.set_ylabel("tokens per verify step / its cost")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")


def concurrency_figure(series: dict[str, list[tuple[int, Speedup]]], answer: str | None = None) -> Figure:
    """The two panels; ``answer`` (analysis.pays.where_it_pays) under the title, wrapped to the width."""
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    plot_speedup_vs_concurrency(left, series)
    plot_why(right, series)
    conf = next(iter(series.values()))[0][1].confidence
    left.set_title(f"> 1: faster with speculation; error bars: {conf:.0%} CI", fontsize="medium")
    right.set_title("faster where acceptance length is above the step cost", fontsize="medium")
    title = "Speed-up vs concurrency (each point: a cell and its baseline at the same concurrency)"
    if answer:
        title += "\n" + "\n".join(textwrap.wrap(answer, 120))
    fig.suptitle(title)
    return fig


def write_concurrency_plot(
    speedups: list[Speedup], cell_axes: dict[str, dict[str, str]], out_dir: Path, note: str = ""
) -> list[Path]:
    """speedup_vs_concurrency.png / .svg when at least two concurrencies have a speed-up."""
    series = concurrency_series(speedups, cell_axes)
    if len({c for pts in series.values() for c, _ in pts}) < 2:
        return []
    figure = concurrency_figure(series, where_it_pays(speedups, cell_axes))
    return save_figure(noted(figure, note), Path(out_dir) / "speedup_vs_concurrency")

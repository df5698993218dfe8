"""Per-position acceptance of one run's cells, one panel per value of an axis (e.g. ``method``),
colour by a second axis and line style by a third, CIs as error bars.

For studies that cross several switches (configs/seed-questions.yaml: method x output_norm x
pos0_mask), where one line per cell in one panel is unreadable. Reads the run's ``cells.csv``
(point estimates from the exact /metrics counts, CIs as acceptance.json recorded them, named in
its ``ci_method`` column: the score interval with a jackknife design effect, or in older runs the
jackknife-t or the percentile bootstrap).

    python -m specbench.cli.plot_facets RUN_DIR OUT.png --panel method --color output_norm --style pos0_mask
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on CI machines

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from specbench.io import atomic_write_bytes

STYLES = ("-", "--", ":", "-.")


def read_cells(run_dir: Path) -> list[dict[str, str]]:
    """The speculative, finished cells of a run (cells.csv rows)."""
    with open(Path(run_dir) / "cells.csv", newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r.get("status") == "done" and r.get("is_baseline") != "True"]


def positions(rows: list[dict[str, str]]) -> list[int]:
    out: list[int] = []
    while rows and all(r.get(f"p{len(out)}") not in (None, "") for r in rows):
        out.append(len(out))
    return out


def plot_panel(
    ax: Axes, rows: list[dict[str, str]], color: str, style: str, colors: dict[str, str], styles: dict[str, str]
) -> None:
    """One line per cell over draft positions, error bars = the cell's CI of p_i."""
    pos = positions(rows)
    n = max(len(rows), 1)
    for j, r in enumerate(sorted(rows, key=lambda r: (list(colors).index(r[color]), list(styles).index(r[style])))):
        xs = [i + (j - (n - 1) / 2) * 0.05 for i in pos]  # offsets keep overlapping error bars apart
        ys = [float(r[f"p{i}"]) for i in pos]
        lo = [y - float(r[f"p{i}_ci_low"]) for i, y in zip(pos, ys)]
        hi = [float(r[f"p{i}_ci_high"]) - y for i, y in zip(pos, ys)]
        al = (
            float(r["mean_acceptance_length"]),
            float(r["mean_acceptance_length_ci_low"]),
            float(r["mean_acceptance_length_ci_high"]),
        )
        label = f"{color} {r[color]}, {style} {r[style]}: AL {al[0]:.2f} [{al[1]:.2f}, {al[2]:.2f}]"
        ax.errorbar(
            xs,
            ys,
            yerr=[lo, hi],
            marker="o",
            capsize=3,
            color=colors[r[color]],
            linestyle=styles[r[style]],
            label=label,
        )
    ax.set_xticks(pos)
    ax.set_xlabel("draft position i")
    ax.set_ylim(-0.02, 1.0)  # p_i = 0 stays visible
    ax.grid(True, alpha=0.3)
    # below the panel: the lines of a poor variant run along the bottom, where a legend would hide them
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, frameon=False)


def facet_figure(rows: list[dict[str, str]], panel: str, color: str, style: str, title: str = "") -> Figure:
    panels = list(dict.fromkeys(r[panel] for r in rows))
    colors = {v: f"C{i}" for i, v in enumerate(dict.fromkeys(r[color] for r in rows))}
    styles = {v: STYLES[i % len(STYLES)] for i, v in enumerate(dict.fromkeys(r[style] for r in rows))}
    fig = Figure(figsize=(5.6 * len(panels), 5.6), layout="constrained")
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for ax, value in zip(axes, panels):
        plot_panel(ax, [r for r in rows if r[panel] == value], color, style, colors, styles)
        ax.set_title(f"{panel} = {value}")
    axes[0].set_ylabel("unconditional acceptance p_i (95% CI)")
    if title:
        fig.suptitle(title)
    return fig


def save(fig: Figure, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=110)
    atomic_write_bytes(Path(path), buf.getvalue())

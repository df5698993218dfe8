"""Overlay plot of per-position acceptance p_i, baseline vs candidate, with bootstrap CI bands.

Data first (:func:`bands` from a cell's units), then drawing on a given Axes (Agg backend).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

from specbench.analysis.acceptance import Counts, bootstrap
from specbench.io import atomic_write_bytes


@dataclass
class Band:
    p: list[float]
    low: list[float]
    high: list[float]
    n_units: int


def bands(units: list[Counts], *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95) -> Band | None:
    """p_i and its per-side bootstrap CI (degenerate with one unit: the band is the line)."""
    if not units:
        return None
    iv = bootstrap(units, n_resamples=n_resamples, seed=seed, confidence=confidence)
    k = sum(1 for key in iv.point if key.startswith("p") and key[1:].isdigit())
    if not k:
        return None
    keys = [f"p{i}" for i in range(k)]
    return Band([iv.point[x] for x in keys], [iv[x][0] for x in keys], [iv[x][1] for x in keys], iv.n_units)


def draw_overlay(ax, title: str, base: Band | None, cand: Band | None, confidence: float = 0.95) -> None:
    for band, label, colour in ((base, "baseline", "tab:blue"), (cand, "candidate", "tab:orange")):
        if band is None:
            continue
        xs = list(range(len(band.p)))
        ax.plot(xs, band.p, marker="o", color=colour, label=f"{label} ({band.n_units} units)")
        lo = [x if not math.isnan(x) else y for x, y in zip(band.low, band.p)]
        hi = [x if not math.isnan(x) else y for x, y in zip(band.high, band.p)]
        ax.fill_between(xs, lo, hi, color=colour, alpha=0.25, linewidth=0)
    k = max(len(b.p) for b in (base, cand) if b is not None) if (base or cand) else 0
    ax.set_xticks(list(range(k)))
    ax.set_xlabel("draft position i")
    ax.set_ylabel("p_i (unconditional acceptance)")
    ax.set_ylim(0, 1.05)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, title=f"{int(round(confidence * 100))}% CI bands", title_fontsize=8)


def save_overlay(path: Path, panels: list[tuple[str, Band | None, Band | None]], confidence: float = 0.95) -> None:
    """One panel per matched cell, written atomically as PNG/SVG/PDF (by the file's suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    panels = [p for p in panels if p[1] is not None or p[2] is not None] or [("no per-position data", None, None)]
    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.8 * cols, 3.6 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (title, b, c) in zip(axes.flat, panels):
        if b is None and c is None:
            ax.set_axis_off()
            ax.text(0.5, 0.5, title, ha="center")
            continue
        draw_overlay(ax, title, b, c, confidence)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_axis_off()
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    atomic_write_bytes(Path(path), buf.getvalue())

"""Speed-up against acceptance length: the curve a synthetic-AL sweep measures (configs/calibration-speedup.yaml)
and where it crosses 1 (break-even), one line per concurrency. Data in, a Figure out."""

from __future__ import annotations

from matplotlib.figure import Figure

import specbench.render.plots  # noqa: F401  (selects the Agg backend before any figure is drawn)
from specbench.render.plots.style import noted

# (concurrency, configured AL, speed-up, CI low, CI high)
Row = tuple[int, float, float, float, float]


def speedup_al_figure(rows: list[Row], breaks: dict[int, float | None], note: str = "") -> Figure:
    """The speed-up (output tok/s over no speculation, 95% CI) at each configured AL; a dashed line
    at 1.0; each concurrency's break-even AL marked where the curve reaches 1 ("none" in the legend
    where it does not over the ALs run)."""
    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    ax = fig.subplots()
    for conc in sorted({r[0] for r in rows}):
        mine = sorted(r for r in rows if r[0] == conc)
        xs, ys = [r[1] for r in mine], [r[2] for r in mine]
        at = breaks.get(conc)
        label = f"concurrency {conc}: break-even " + (
            f"AL {at:.2f}" if at is not None else "none up to AL " + f"{xs[-1]:g}"
        )
        err = [[max(y - r[3], 0.0) for y, r in zip(ys, mine)], [max(r[4] - y, 0.0) for y, r in zip(ys, mine)]]
        bars = ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, linewidth=1.5, label=label)
        if at is not None:
            ax.axvline(at, color=bars.lines[0].get_color(), linestyle=":", linewidth=1)
    ax.axhline(1.0, color="0.3", linestyle="--", linewidth=1)
    ax.set_xlabel("configured acceptance length (synthetic sampler)")
    ax.set_ylabel("speed-up: output tok/s over no speculation")
    ax.set_title("Speed-up against acceptance length (95% CI)", fontsize="medium")
    ax.legend(fontsize="small", frameon=False, loc="upper left")
    ax.grid(alpha=0.3)
    return noted(fig, note)  # under the axes, laid out with them

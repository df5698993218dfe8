"""No text under 8 pt as a reader sees it (issue 57): every figure report draws for every committed
baseline, each text's size scaled by how much index.html shrinks the figure (its page shows a
figure at most 1148 px wide: body max-width 1180 px less padding, render/html.py; 96 px an inch).
The divergence heatmap of a 14-cell study was 21 in wide, shown at 4-6 pt."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASELINES = sorted(p for p in (ROOT / "results" / "baselines").iterdir() if (p / "manifest.json").is_file())
PAGE_PX = 1148
MIN_PT = 8.0


def _smallest(fig) -> tuple[float, str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    FigureCanvasAgg(fig)
    fig.canvas.draw()
    scale = min(1.0, PAGE_PX / (fig.get_size_inches()[0] * 96))
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min((t.get_fontsize() * scale, t.get_text()) for t in texts)


@pytest.mark.heavy
@pytest.mark.parametrize("run", BASELINES, ids=[p.name for p in BASELINES])
def test_every_figure_text_reads_at_8_pt_or_more(run):
    from specbench.render.plots.curves import al_over_time_figure, per_position_figure
    from specbench.render.plots.speedup_divergence import divergence_figure, speedup_figure
    from specbench.render.plots.style import encode
    from specbench.report.assemble import build_report, facets_of

    rep = build_report([run], n_resamples=200)
    enc = encode([(g.label, g.axes) for g in rep.groups])
    figures = {
        "per_position": per_position_figure(rep.summary, rep.confidence, enc, facets_of(rep.groups)),
        "al_over_time": al_over_time_figure({g.label: g.units for g in rep.groups}, rep.summary, enc, rep.confidence),
    }
    pairs = [p for s in rep.studies for p, _ in s.pairs]
    speeds = [x for s in rep.studies for x in s.speedups]
    if pairs:
        figures["divergence"] = divergence_figure(pairs, rep.title)
    if speeds:
        figures["speedup"] = speedup_figure(speeds, rep.title)
    small = {name: _smallest(fig) for name, fig in figures.items()}
    assert all(pt >= MIN_PT for pt, _ in small.values()), {n: (round(pt, 1), t) for n, (pt, t) in small.items()}

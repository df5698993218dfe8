"""No text of a report figure falls outside its figure: titles, tick labels, axis labels and
legends of the per-position (faceted where report facets it) and AL-over-time figures of every
committed baseline, as report draws them. A legend cut at both edges was what a two-run report
showed before."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.analysis.frames import summary_frame
from specbench.render.plots.acceptance import al_over_time_figure, per_position_figure
from specbench.render.plots.style import encode
from specbench.report.build import facets_of
from specbench.report.inputs import groups_from_run

ROOT = Path(__file__).resolve().parents[2]
BASELINES = sorted(p for p in (ROOT / "results" / "baselines").iterdir() if (p / "manifest.json").is_file())
pytestmark = pytest.mark.slow


def _outside(fig) -> list[str]:
    """What of the drawn figure lies past its edges: the tight box of every drawn artist (ticks
    outside an axis' view are not drawn, so not counted) against the figure's own box, in inches."""
    fig.canvas.draw()  # lays the figure out (constrained layout) as savefig does
    tight, page = fig.get_tightbbox(fig.canvas.get_renderer()), fig.bbox_inches
    out = []
    for side, over in (
        ("left", page.x0 - tight.x0),
        ("bottom", page.y0 - tight.y0),
        ("right", tight.x1 - page.x1),
        ("top", tight.y1 - page.y1),
    ):
        if over > 0.01:
            out.append(f"{side}: {over:.2f} in past the edge")
    return out


@pytest.mark.parametrize("run", BASELINES, ids=[p.name for p in BASELINES])
def test_no_text_of_a_report_figure_is_clipped(run):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    groups = groups_from_run(run)
    summary = summary_frame({g.label: g.units for g in groups}, unit={g.label: g.unit for g in groups})
    enc = encode([(g.label, g.axes) for g in groups])
    for fig in (
        per_position_figure(summary, enc=enc, facets=facets_of(groups)),
        al_over_time_figure({g.label: g.units for g in groups}, summary, enc),
    ):
        FigureCanvasAgg(fig)
        assert _outside(fig) == [], run.name


@pytest.mark.parametrize("name", ["cpu-default", "cpu-seed-questions"])
def test_no_text_of_a_study_figure_is_clipped(name):
    """The speed-up and divergence figures of the two largest committed studies (6 and 12
    speculative cells), titled as report titles them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from specbench.render.plots.study import divergence_figure, speedup_figure
    from specbench.report.build import run_titles
    from specbench.report.study import analyse_run

    run = ROOT / "results" / "baselines" / name
    study, titles = analyse_run(run, n_resamples=200), run_titles(run)
    title = lambda label: titles.get(label, label)  # noqa: E731
    for fig in (speedup_figure(study.speedups, title), divergence_figure([p for p, _ in study.pairs], title)):
        FigureCanvasAgg(fig)
        assert _outside(fig) == [], name

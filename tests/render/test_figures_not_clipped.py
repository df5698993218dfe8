"""No text of a report figure falls outside its figure: titles, tick labels, axis labels and
legends of the per-position (faceted where report facets it), AL-over-time and change-vs-reference
figures of every committed baseline, as report draws them, and of the speed-up-vs-concurrency
figure. A legend cut at both edges was what a two-run report showed before. Panel titles do not run
into each other (three-axis titles over four columns of the change-vs-reference figure did)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.analysis.frames import summary_frame
from specbench.render.plots.curves import al_over_time_figure, per_position_figure
from specbench.render.plots.style import encode
from specbench.report.assemble import facets_of
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


def _overlapping_titles(fig) -> list[str]:
    """Pairs of axes titles whose drawn boxes intersect."""
    renderer = fig.canvas.get_renderer()
    boxes = [(ax.get_title(), ax.title.get_window_extent(renderer)) for ax in fig.axes if ax.get_title()]
    return [
        f"{a!r} / {b!r}" for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1 :] if box_a.overlaps(box_b)
    ]


@pytest.mark.parametrize("run", BASELINES, ids=[p.name for p in BASELINES])
def test_no_text_of_a_report_figure_is_clipped(run):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from specbench.report.assemble import titles_of
    from specbench.report.reference import reference_figure, reference_view
    from specbench.results.read import read_run

    loaded = read_run(run)
    groups = groups_from_run(loaded)
    names = titles_of(loaded)
    summary = summary_frame({g.label: g.units for g in groups}, unit={g.label: g.unit for g in groups})
    enc = encode([(g.label, g.axes) for g in groups])
    figures = [
        per_position_figure(summary, enc=enc, facets=facets_of(groups)),
        al_over_time_figure({g.label: g.units for g in groups}, summary, enc),
    ]
    title = lambda label: names.get(label, label)  # noqa: E731
    view = reference_view(groups, None, 0.95, title)
    if view is not None:
        figures.append(reference_figure(view, groups, 0.95, title))
    for fig in figures:
        FigureCanvasAgg(fig)
        assert _outside(fig) == [], run.name
        assert _overlapping_titles(fig) == [], run.name


def test_no_text_of_the_concurrency_figure_is_clipped():
    """No committed run varies concurrency: speed-ups of three concurrencies x two MLA settings,
    with the provenance note report puts under it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from specbench.analysis.speedup import Speedup
    from specbench.render.plots.concurrency import concurrency_figure, concurrency_series
    from specbench.render.plots.style import noted

    def speedup(cell: str, tok: float, al: float, cost: float) -> Speedup:
        point = {"output_tok_per_s": tok, "tpot": tok, "e2e": tok, "decomposition": al / cost, "cost_ratio": cost}
        return Speedup(cell, "b-" + cell, 8, 8, True, {"mean_acceptance_length": al}, {}, point,
                       {k: (v * 0.8, v * 1.2) for k, v in point.items()}, 0.95)  # fmt: skip

    axes = {f"c{c}-{m}": {"concurrency": str(c), "mla": m} for c in (1, 4, 16) for m in ("on", "off")}
    speeds = [speedup(cell, 2.0 / int(a["concurrency"]) ** 0.5, 2.4, 1.3) for cell, a in axes.items()]
    note = "20261204T184305Z-default · fixture:heads-target · k 3 · vLLM 0.32.0 · 20 requests per cell"
    fig = noted(concurrency_figure(concurrency_series(speeds, axes)), note)
    FigureCanvasAgg(fig)
    assert _outside(fig) == [] and _overlapping_titles(fig) == []


@pytest.mark.parametrize("name", ["cpu-default", "cpu-seed-questions"])
def test_no_text_of_a_study_figure_is_clipped(name):
    """The speed-up and divergence figures of the two largest committed studies (6 and 12
    speculative cells), titled as report titles them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from specbench.render.plots.speedup_divergence import divergence_figure, speedup_figure
    from specbench.report.assemble import run_titles
    from specbench.report.baseline_pairs import analyse_run

    run = ROOT / "results" / "baselines" / name
    study, titles = analyse_run(run, n_resamples=200), run_titles(run)
    title = lambda label: titles.get(label, label)  # noqa: E731
    for fig in (speedup_figure(study.speedups, title), divergence_figure([p for p, _ in study.pairs], title)):
        FigureCanvasAgg(fig)
        assert _outside(fig) == [], name


def test_no_text_of_the_speedup_against_al_figure_is_clipped():
    """benchmarks/calibration.py --figure: six ALs x two concurrencies, a break-even line, the note."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from specbench.render.plots.speedup_al import speedup_al_figure

    ys = {(c, al): 0.3 + 0.15 * al * c / 4 for c in (1, 4) for al in (1.5, 2, 3, 4)}
    rows = [(c, al, y, 0.8 * y, 1.3 * y) for (c, al), y in ys.items()]
    fig = speedup_al_figure(rows, {1: None, 4: 3.92}, note="cpu-calibration-speedup: a provenance note of some length")
    FigureCanvasAgg(fig)
    assert _outside(fig) == []
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["concurrency 1: break-even none up to AL 4", "concurrency 4: break-even AL 3.92"]

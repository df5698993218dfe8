"""Divergence heatmap and speed-up forest plot, from the real default-study run (no servers)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from specbench.render.plots.speedup_divergence import divergence_figure, divergence_matrix, speedup_figure
from specbench.report.baseline_pairs import analyse_run

RUN = Path(
    os.environ.get("SPECBENCH_TEST_RUN_DIR")
    or Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
)


@pytest.fixture(scope="module")
def study():
    if not (RUN / "manifest.json").is_file():
        pytest.skip(f"{RUN}: no run directory")
    return analyse_run(RUN, n_resamples=200)


def test_divergence_is_one_symmetric_matrix_of_cells(study):
    pairs = [p for p, _ in study.pairs]
    cells, share, median, text = divergence_matrix(pairs)
    n = len(cells)
    assert n * (n - 1) // 2 == len(pairs)  # every pair once, n x n instead of one row per pair
    assert np.allclose(np.nan_to_num(share), np.nan_to_num(share.T)) and np.isnan(np.diag(share)).all()
    for p in pairs:
        i, j = cells.index(p.a), cells.index(p.b)
        assert share[i, j] == p.identical_share and text[j][i] == f"{p.identical}/{p.n}"
    fig = divergence_figure(pairs, lambda c: c.upper())
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [c.upper() for c in cells]


def test_speedup_forest_is_log_and_spans_its_data_and_one(study):
    """The axis runs over the data and 1x, padded by 6% of its log width: no empty decade (it
    used to be centred at 1x, running to 3x where no interval reached), and says which side is slower."""
    fig = speedup_figure(study.speedups)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    lo, hi = ax.get_xlim()
    from specbench.render.plots.speedup_divergence import SPEEDUPS  # the speed-ups drawn (not the step cost)

    ends = [x for s in study.speedups for k in SPEEDUPS for x in s.intervals[k]] + [1.0]
    data = math.log(max(ends)) - math.log(min(ends))
    assert math.log(min(ends)) - math.log(lo) < 0.1 * data and math.log(hi) - math.log(max(ends)) < 0.1 * data
    assert lo < 1.0 < hi and any(line.get_xdata()[0] == 1.0 for line in ax.get_lines())  # the no-change line
    assert {t.get_text() for t in ax.texts} >= {"← slower", "faster →"}
    assert [t.get_text() for t in ax.get_yticklabels()] == [s.cell for s in study.speedups]
    for s in study.speedups:
        assert lo < s.intervals["output_tok_per_s"][0] and s.intervals["output_tok_per_s"][1] < hi


def test_speedup_ticks_never_crowd_at_any_axis_width():
    import math

    from specbench.render.plots.speedup_divergence import spaced_ticks

    for span in (math.log(1.25) * 1.08, 0.5, 1.0, math.log(4) * 1.08, 2.0):
        ticks = spaced_ticks(span)
        assert 1.0 in ticks and all(math.exp(-span) <= t <= math.exp(span) for t in ticks)
        gaps = [math.log(b) - math.log(a) for a, b in zip(ticks, ticks[1:])]
        assert all(g >= 0.1 * 2 * span - 1e-9 for g in gaps), (span, ticks)
    assert len(spaced_ticks(math.log(4) * 1.08)) >= 5  # a wide axis still has ticks on both sides


def _intervals(ax) -> int:
    return sum(len(c.lines[0].get_ydata()) for c in ax.containers)


def test_a_figure_of_many_cells_shows_the_headline_only_at_most_12_a_panel():
    """seed-questions' 12 cells x 4 estimates were 48 near-identical bars: past 12 intervals the
    figure draws each cell's measured tok/s speed-up (the estimate the answers read) and names where
    the other three are; past 12 cells it stacks panels of at most 12 rows on one shared axis."""
    import dataclasses

    from specbench.render.plots.speedup_divergence import MAX_INTERVALS, SPEEDUPS

    seed = analyse_run(RUN.parent / "cpu-seed-questions", n_resamples=200).speedups
    assert len(seed) * len(SPEEDUPS) > MAX_INTERVALS  # the case this guards
    fig = speedup_figure(seed)
    (ax,) = [a for a in fig.axes if a.get_yticklabels()]
    assert _intervals(ax) == len(seed) <= MAX_INTERVALS
    assert [t.get_label() for t in ax.containers] == ["output tok/s (measured)"]
    assert "speedup.csv" in fig.get_suptitle()
    many = [dataclasses.replace(s, cell=f"{s.cell} #{i}") for i in range(3) for s in seed]  # 36 cells
    fig = speedup_figure(many)
    panels = [a for a in fig.axes if a.get_yticklabels()]
    assert len(panels) == 3 and all(_intervals(a) <= MAX_INTERVALS for a in panels)
    assert [t.get_text() for a in panels for t in a.get_yticklabels()] == [s.cell for s in many]
    assert len({a.get_xlim() for a in panels}) == 1  # one scale to read across panels
    small = speedup_figure(study_cells := seed[:3])  # few cells: every estimate, one panel
    assert _intervals(small.axes[0]) == len(study_cells) * len(SPEEDUPS)

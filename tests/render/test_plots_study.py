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

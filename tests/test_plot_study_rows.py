"""The divergence figure's two panels show one row per pair of cells, on the same rows.

The left panel names the pairs (tick labels), the right one has no labels of its own: a row of
dots belongs to the pair named at the same height on the left. Real data: the committed default
study (28 pairs), where panels with different y-limits drifted by more than a row at the ends.
"""

from __future__ import annotations

from pathlib import Path

from specbench.plot_study import divergence_figure
from specbench.report_study import analyse_run

RUN = Path(__file__).resolve().parents[1] / "results" / "baselines" / "cpu-default"


def test_both_panels_put_each_pair_on_the_same_row():
    pairs = [p for p, _ in analyse_run(RUN, n_resamples=50).pairs]
    assert len(pairs) == 28
    left, right = divergence_figure(pairs).axes[:2]
    assert left.get_ylim() == right.get_ylim() == (len(pairs) - 0.5, -0.5)
    assert list(left.get_yticks()) == list(right.get_yticks()) == list(range(len(pairs)))
    assert left.get_yticklabels()[0].get_text() == f"{pairs[0].a}\nvs {pairs[0].b}"  # first pair on top

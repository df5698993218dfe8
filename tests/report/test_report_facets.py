"""report's per-position figure facets when one panel would hold more than six lines: the seed
questions' 12 cells (method x output norm x pos0 mask) get a row of panels per method."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

from specbench.report.assemble import MAX_LINES_PER_PANEL, facets_of


def _groups(axes_values: dict[str, list[str]]):
    names = list(axes_values)
    return [
        SimpleNamespace(label=f"g{i}", axes=dict(zip(names, combo)))
        for i, combo in enumerate(itertools.product(*axes_values.values()))
    ]


def test_twelve_cells_in_three_axes_get_a_panel_per_value_of_the_smallest_axis():
    groups = _groups(
        {"output_norm": ["on", "logits-only", "off"], "method": ["eagle", "mtp"], "pos0_mask": ["off", "on"]}
    )
    facets = facets_of(groups)
    assert [title for title, _ in facets] == ["method eagle", "method mtp"]  # the first 2-valued axis
    assert sorted(label for _, labels in facets for label in labels) == sorted(g.label for g in groups)
    assert all(len(labels) == 6 <= MAX_LINES_PER_PANEL for _, labels in facets)


def test_six_lines_or_one_varying_axis_stay_in_one_panel():
    assert facets_of(_groups({"mla": ["on", "off"], "output_norm": ["on", "logits-only", "off"]})) is None
    assert facets_of(_groups({"k": [str(k) for k in range(1, 9)]})) is None  # 8 lines, but one axis


def test_a_faceted_figure_has_a_row_of_panels_per_facet():
    import numpy as np

    from specbench.analysis.frames import summary_frame
    from specbench.records.counts import Counts
    from specbench.render.plots.curves import per_position_figure

    rng = np.random.default_rng(0)
    units = {
        f"g{i}": [Counts(40, 120, int(s.sum()), s.tolist(), 3) for s in rng.integers(5, 15, size=(4, 3))]
        for i in range(4)
    }
    fig = per_position_figure(summary_frame(units), facets=[("method a", ["g0", "g1"]), ("method b", ["g2", "g3"])])
    assert len(fig.axes) == 4
    assert [ax.get_title().split(":")[0] for ax in fig.axes] == ["method a"] * 2 + ["method b"] * 2
    assert fig.axes[2].get_legend_handles_labels()[1] == ["g2", "g3"]  # its facet's groups only

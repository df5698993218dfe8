"""Plots render to real, non-empty PNG and SVG files that carry their axis labels and legend."""

import math

import numpy as np
import pytest

from specbench.analysis.frames import summary_frame
from specbench.records.counts import Counts
from specbench.render.plots.curves import al_over_time_figure, per_position_figure, plot_per_position, save_figure


def groups():
    rng = np.random.default_rng(0)

    def units(alpha):
        out = []
        for _ in range(8):
            prefix = np.cumprod(rng.random((50, 3)) < alpha, axis=1).sum(axis=0).astype(int).tolist()
            out.append(Counts(50, 150, sum(prefix), prefix, 3))
        return out

    return {"output_norm=on": units(0.77), "output_norm=off": units(0.5)}


@pytest.mark.heavy
def test_per_position_and_al_over_time_files(tmp_path):
    g = groups()
    summary = summary_frame(g)
    paths = save_figure(per_position_figure(summary), tmp_path / "per_position")
    paths += save_figure(al_over_time_figure(g, summary), tmp_path / "al_over_time")
    assert [p.name for p in paths] == ["per_position.png", "per_position.svg", "al_over_time.png", "al_over_time.svg"]
    for p in paths:
        data = p.read_bytes()
        assert len(data) > 5000
        if p.suffix == ".png":
            assert data.startswith(b"\x89PNG")
    svg = (tmp_path / "per_position.svg").read_text()
    for text in ("draft position", "unconditional", "output_norm=off"):
        assert text in svg


def test_plot_per_position_draws_one_line_per_group_with_ci():
    from matplotlib.figure import Figure

    summary = summary_frame(groups())
    ax = Figure().subplots()
    plot_per_position(ax, summary, "p")
    assert ax.get_legend_handles_labels()[1] == ["output_norm=on", "output_norm=off"]  # the figure has the legend
    line = ax.get_lines()[0]
    ys = line.get_ydata()
    assert np.allclose(ys, summary.loc[0, ["p0", "p1", "p2"]].astype(float).to_numpy())
    assert ax.get_xlabel() == "draft position $i$"


def test_each_axis_is_encoded_once_with_one_shared_legend():
    """Colour follows one axis, line style the other; the legend names axis values, not cells."""
    from specbench.render.plots.style import encode

    rng = np.random.default_rng(1)
    cells = {}
    for mla in ("on", "off"):
        for norm in ("on", "off"):
            units = []
            for _ in range(6):
                prefix = np.cumprod(rng.random((40, 3)) < 0.7, axis=1).sum(axis=0).astype(int).tolist()
                units.append(Counts(40, 120, sum(prefix), prefix, 3))
            cells[f"mla-{mla}__output_norm-{norm}__r0"] = ({"mla": mla, "output_norm": norm}, units)
    enc = encode([(lab, axes) for lab, (axes, _) in cells.items()])
    st = enc.styles
    assert st["mla-on__output_norm-on__r0"].color == st["mla-off__output_norm-on__r0"].color
    assert st["mla-on__output_norm-on__r0"].color != st["mla-on__output_norm-off__r0"].color
    assert st["mla-on__output_norm-on__r0"].linestyle == st["mla-on__output_norm-off__r0"].linestyle
    assert st["mla-on__output_norm-on__r0"].linestyle != st["mla-off__output_norm-on__r0"].linestyle
    summary = summary_frame({lab: u for lab, (_, u) in cells.items()})
    fig = per_position_figure(summary, enc=enc)
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["norm on", "norm off", "MLA on", "MLA off"]
    assert "$p_i$" in fig.axes[0].get_ylabel() and r"\alpha" in fig.axes[1].get_ylabel()


def test_cumulative_al_sums_counts_and_its_last_interval_is_the_cells():
    """Each point: AL over the first n units from summed counts (checked against a plain sum), with
    the per-cell interval of those n units; the last is the group's own interval (the table's)."""
    from specbench.analysis.intervals import cell_intervals, cumulative_intervals

    # unequal drafts per unit: averaging the units' rates would give another number
    raw = [(10, 9, [6, 3]), (100, 20, [15, 5]), (30, 15, [10, 5]), (60, 40, [25, 15]), (45, 30, [20, 10])]
    units = [Counts(d, 2 * d, a, pos, 2) for d, a, pos in raw]
    cum = cumulative_intervals(units)
    assert [c[0] for c in cum] == [1, 2, 3, 4, 5]
    for n, al, lo, hi in cum:
        assert al == pytest.approx(1 + sum(a for _, a, _ in raw[:n]) / sum(d for d, _, _ in raw[:n]))
        if n == 1:
            assert math.isnan(lo) and math.isnan(hi)  # one unit: no interval
        else:
            assert (lo, hi) == cell_intervals(units[:n])["mean_acceptance_length"] and lo < al < hi
    assert cum[-1][2:] == cell_intervals(units)["mean_acceptance_length"]


@pytest.mark.heavy
def test_cumulative_al_of_a_long_log_is_a_bounded_number_of_points_ending_at_the_pooled_al():
    from specbench.analysis.intervals import cumulative_intervals

    rng = np.random.default_rng(0)
    d = rng.integers(1, 50, size=30_000)
    a = rng.binomial(3 * d, 0.5)
    cum = cumulative_intervals([Counts(int(x), 3 * int(x), int(y)) for x, y in zip(d, a)], max_points=200)
    assert len(cum) == 200 and cum[-1][0] == 30_000 and cum[0][0] == 1
    assert cum[-1][1] == pytest.approx(1 + a.sum() / d.sum())


def test_a_wide_interval_is_drawn_hollow_and_faded_and_firm_points_are_not():
    """A head whose drafts almost never reach position 2 has alpha_2 over a handful of trials (CI
    about [0, 0.9]): drawn at full weight it dominates the panel. Its point is hollow and faded,
    its bar faded; every other point keeps its filled marker and full-weight bar."""
    from matplotlib.figure import Figure

    rng = np.random.default_rng(2)
    units = []
    for _ in range(8):  # alpha_0 0.5, alpha_1 0.05: a few tokens at position 2 in all
        prefix = np.cumprod(rng.random((50, 3)) < [0.5, 0.05, 0.5], axis=1).sum(axis=0).astype(int).tolist()
        units.append(Counts(50, 150, sum(prefix), prefix, 3))
    summary = summary_frame({"dead-ish": units})
    lo, hi = summary.loc[0, "a2_ci_low"], summary.loc[0, "a2_ci_high"]
    assert hi - lo > 0.5 and summary.loc[0, "a0_ci_high"] - summary.loc[0, "a0_ci_low"] < 0.5  # the premise
    ax = Figure().subplots()
    plot_per_position(ax, summary, "a")
    main, faint = ax.get_lines()[0], [ln for ln in ax.get_lines() if (ln.get_alpha() or 1) < 1]
    assert len(main.get_xdata()) == 2  # the line and filled markers: the firm points only
    hollow = [ln for ln in faint if ln.get_markerfacecolor() == "white"]  # (the rest: its faded caps)
    assert len(hollow) == 1 and hollow[0].get_xdata()[0] > max(main.get_xdata())  # position 2, alone
    assert all((ln.get_alpha() or 1) == 1 for ln in ax.get_lines() if ln not in faint)
    assert any("hollow, faded" in t.get_text() for t in ax.texts)

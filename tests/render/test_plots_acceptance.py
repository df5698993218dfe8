"""Plots render to real, non-empty PNG and SVG files that carry their axis labels and legend."""

import numpy as np

from specbench.analysis.counts import Counts
from specbench.analysis.frames import summary_frame, window_frame
from specbench.render.plots.acceptance import al_over_time_figure, per_position_figure, plot_per_position, save_figure


def groups():
    rng = np.random.default_rng(0)

    def units(alpha):
        out = []
        for _ in range(8):
            prefix = np.cumprod(rng.random((50, 3)) < alpha, axis=1).sum(axis=0).astype(int).tolist()
            out.append(Counts(50, 150, sum(prefix), prefix, 3))
        return out

    return {"output_norm=on": units(0.77), "output_norm=off": units(0.5)}


def test_per_position_and_al_over_time_files(tmp_path):
    g = groups()
    summary = summary_frame(g, n_resamples=200)
    paths = save_figure(per_position_figure(summary), tmp_path / "per_position")
    paths += save_figure(al_over_time_figure(window_frame(g), summary), tmp_path / "al_over_time")
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

    summary = summary_frame(groups(), n_resamples=200)
    ax = Figure().subplots()
    plot_per_position(ax, summary, "p")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["output_norm=on", "output_norm=off"]
    line = ax.get_lines()[0]
    ys = line.get_ydata()
    assert np.allclose(ys, summary.loc[0, ["p0", "p1", "p2"]].astype(float).to_numpy())
    assert ax.get_xlabel() == "draft position"

"""specbench/render/plots/concurrency.py: speed-up vs concurrency, from Speedup records."""

from __future__ import annotations

import math

import pytest

from specbench.analysis.speedup import Speedup
from specbench.render.plots.concurrency import concurrency_series, write_concurrency_plot


def _s(cell: str, tok: float, al: float, cost: float) -> Speedup:
    point = {"output_tok_per_s": tok, "tpot": tok * 1.05, "e2e": tok, "decomposition": al / cost, "cost_ratio": cost}
    return Speedup(
        cell=cell,
        baseline="b-" + cell,
        n_spec=8,
        n_base=8,
        paired=True,
        spec={"mean_acceptance_length": al},
        base={},
        point=point,
        intervals={k: (v * 0.9, v * 1.1) for k, v in point.items()},
        confidence=0.95,
    )


AXES = {f"c{c}-{m}": {"concurrency": str(c), "mla": m} for c in (1, 2, 4) for m in ("on", "off")}


def test_series_per_other_axes_sorted_by_concurrency():
    speeds = [_s(f"c{c}-{m}", 2.0 / c, 2.6, 1.0 + c / 4) for c in (4, 1, 2) for m in ("on", "off")]
    speeds.append(_s("no-axis", 1.0, 2.0, 1.0))  # a cell without the axis is left out
    series = concurrency_series(speeds, {**AXES, "no-axis": {"mla": "on"}})
    assert list(series) == ["mla=on", "mla=off"]
    assert [c for c, _ in series["mla=on"]] == [1, 2, 4]
    assert [s.cell for _, s in series["mla=off"]] == ["c1-off", "c2-off", "c4-off"]


@pytest.mark.heavy
def test_plot_written_only_with_two_concurrencies(tmp_path):
    speeds = [_s(f"c{c}-{m}", 2.0 / c, 2.6, 1.0 + c / 4) for c in (1, 2, 4) for m in ("on", "off")]
    paths = write_concurrency_plot(speeds, AXES, tmp_path)
    assert sorted(p.name for p in paths) == ["speedup_vs_concurrency.png", "speedup_vs_concurrency.svg"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert write_concurrency_plot(speeds[:2], AXES, tmp_path / "one") == []  # c1 only: no line to draw
    nan = _s("c2-on", math.nan, 2.0, math.nan)  # a cell without timings must not break the figure
    assert write_concurrency_plot([speeds[0], nan], AXES, tmp_path / "nan")

"""docs/studies/calibration.md shows what benchmarks/calibration.py computes from the committed
calibration runs (specbench/testing/calibration_tables.py): each block between
``<!-- calibration.py NAME -->`` markers is exactly the table the code prints now, the coverage
figures quoted in the text are the code's, and every cell's log windows count what /metrics counts.
The truth the coverage is held to is vLLM's: a length's rates are the ones the workers attested."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specbench.testing.calibration_tables import (
    CALIBRATION,
    SEEDS,
    SPEEDUP,
    break_even,
    cell_table,
    coverage_table,
    crossing,
    position0_table,
    speedup_points,
    speedup_table,
)
from specbench.testing.truth import coverage, length_to_rates, read_cells, truth_stats

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "studies" / "calibration.md"


def _block(name: str) -> str:
    m = re.search(rf"<!-- calibration.py {name} -->\n(.*?)\n<!-- /calibration.py {name} -->", DOC.read_text(), re.S)
    assert m, f"{DOC.name}: no {name!r} block"
    return m.group(1)


@pytest.fixture(scope="module")
def cells():
    return read_cells(CALIBRATION)


@pytest.fixture(scope="module")
def length_cells():
    return read_cells(SPEEDUP)


@pytest.fixture(scope="module")
def seed_cells():
    return read_cells(SEEDS)


def test_the_pages_cell_tables_are_what_the_code_prints(cells, length_cells):
    assert _block("cells") == cell_table(cells)
    assert _block("length-cells") == cell_table(length_cells, drafts="verify steps")


def test_the_pages_coverage_is_what_the_code_computes(cells, length_cells):
    assert _block("coverage") == coverage_table(cells)
    assert _block("coverage-all") == coverage_table(cells + length_cells)
    text = " ".join(DOC.read_text().split())
    both = cells + length_cells
    p = coverage(both, "p")
    inner = coverage(both, "p", interior=True)
    claim = (
        f"cover the configured p_i in {p.covered} of {p.pairs} (cell, position) pairs ({p.share:.1%}); "
        f"{inner.covered} of {inner.pairs} ({inner.share:.1%}) where the rate is strictly between 0 and 1, "
        f"mean |error| {p.mean_abs_error:.4f}"
    )
    assert claim in text, claim


def test_log_windows_count_what_metrics_counts_in_every_cell(cells, length_cells, seed_cells):
    every = cells + length_cells + seed_cells
    assert (len(cells), len(length_cells), len(seed_cells)) == (8, 12, 4)
    assert not [c.cell for c in every if not (c.log_equals_metrics and c.per_request_equals_metrics)]
    assert all(c.drafts >= 500 for c in every)


def test_position_0_at_seed_0_and_at_seeds_1_to_4_is_what_the_page_says(cells, length_cells, seed_cells):
    """The page: at vLLM's default seed p_0 is below its rate in every cell where that rate is
    fractional (one shared uniform stream); at seeds 1-4 the same cell has no shortfall."""
    assert _block("position0") == position0_table(cells + length_cells + seed_cells)
    assert _block("seed-cells") == cell_table(seed_cells, drafts="verify steps")
    seed0 = [c for c in cells + length_cells if 0 < c.rates[0] < 1]
    assert len(seed0) == 10 and all(c.estimates["p0"] < c.rates[0] for c in seed0)
    assert sorted(int(c.axes["flag:--seed"]) for c in seed_cells) == [1, 2, 3, 4]
    assert all(c.estimates["p0"] >= c.rates[0] for c in seed_cells)


def test_a_lengths_rates_are_the_ones_vllm_resolved_and_ran(cells, length_cells):
    for c in cells + length_cells:
        assert c.attested_rates is not None, c.cell
        assert c.attested_rates == pytest.approx(c.rates, abs=1e-6), c.cell
    assert length_to_rates(2.5, 3) == [1.0, 0.5, 0.0] and length_to_rates(4.0, 3) == [1.0, 1.0, 1.0]


def test_truth_statistics_of_a_rate_profile():
    t = truth_stats([0.9, 0.6, 0.0])
    assert t["mean_acceptance_length"] == pytest.approx(2.5) and t["draft_acceptance_rate"] == pytest.approx(0.5)
    assert t["a1"] == pytest.approx(2 / 3) and t["a2"] == 0.0
    assert truth_stats([0.5, 0.0, 0.0])["a2"] != truth_stats([0.5, 0.0, 0.0])["a2"]  # nan: after a rate of 0


def test_break_even_is_interpolated_where_the_curve_reaches_one():
    assert crossing([1.5, 2.0, 2.5], [0.6, 0.8, 1.2]) == pytest.approx(2.25)
    assert crossing([1.5, 2.0], [0.6, 0.8]) is None
    assert crossing([1.5, 2.0], [1.1, 1.3]) == 1.5


@pytest.mark.heavy
def test_the_pages_speedup_table_is_what_the_report_computes():
    points = speedup_points(SPEEDUP)
    assert _block("speedup") == speedup_table(points)
    assert set(break_even(points)) == {1, 4}

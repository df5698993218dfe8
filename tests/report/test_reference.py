"""specbench/report/reference.py: every cell against one reference cell, on the committed default
study. The changes are checked against the report's own per-cell table (summed counts of each
cell, an independent path), and against the "Differences between cells" intervals where a cell
differs from the reference in one axis."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.main import app
from specbench.errors import ConfigError
from specbench.report.assemble import build_report
from specbench.report.reference import pick_reference, reference_rows

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"


@pytest.fixture(scope="module")
def report():
    return build_report([RUN], n_resamples=200)


def test_default_reference_is_the_first_cell_and_every_other_is_set_against_it(report):
    view = report.reference
    spec = [g.label for g in report.groups if g.units]
    assert view is not None and not view.chosen
    assert view.reference == spec[0]
    assert [r.label for r in view.rows] == spec[1:]


def test_each_change_is_the_cells_own_level_minus_the_references(report):
    """Points against summary_frame's per-cell values (pooled counts); every interval holds its point."""
    view = report.reference
    table = report.summary.set_index("label")
    ref = table.loc[view.reference]
    for r in view.rows:
        cell = table.loc[r.label]
        for stat in ["mean_acceptance_length", *(f"p{i}" for i in range(r.positions()))]:
            d = r.deltas[stat]
            assert d.point == pytest.approx(cell[stat] - ref[stat], abs=1e-12), (r.label, stat)
            lo, hi = d.ci
            assert lo < d.point < hi, (r.label, stat)


def test_a_one_axis_neighbour_gets_the_same_interval_as_the_differences_section(report):
    view = report.reference
    by_label = {r.label: r for r in view.rows}
    checked = 0
    for c in report.comparisons:
        if c.base == view.reference and c.cand in by_label:
            assert by_label[c.cand].deltas["mean_acceptance_length"].ci == pytest.approx(
                c.intervals["mean_acceptance_length"]
            )
            checked += 1
    assert checked >= 2  # the default study: norm and MLA each differ from the first cell in one axis


def test_the_table_shows_signed_changes_in_pp(report):
    header, rows = reference_rows(report.reference, report.title)
    assert header[:3] == ["cell", "ΔAL", "Δp_0 (pp)"]
    norm_off = next(r for r in rows if r[0] == "MLA on · norm off")
    # the committed run: norm off drops p_1 by ~58 pp against norm on
    assert norm_off[3].startswith("-5") and "[" in norm_off[3]


def test_reference_by_title_or_id_and_clear_errors(report):
    title = report.title
    groups = report.groups
    by_title = pick_reference(groups, "MLA off · norm on", title)
    assert title(by_title) == "MLA off · norm on"
    assert pick_reference(groups, by_title, title) == by_title  # the cell id names it too
    with pytest.raises(ConfigError, match="--reference 'nope' names no cell"):
        pick_reference(groups, "nope", title)


@pytest.mark.heavy
def test_cli_reference_flag_writes_table_and_figure(tmp_path):
    runner = CliRunner()
    out = tmp_path / "rep"
    res = runner.invoke(app, ["report", str(RUN), "--out", str(out), "--reference", "MLA off · norm on"])
    assert res.exit_code == 0, res.output
    text = (out / "summary.md").read_text()
    assert "**MLA off · norm on** (chosen with `--reference`)" in text
    assert "| MLA on · norm on |" in text.split("## Change vs reference", 1)[1].split("\n## ", 1)[0]
    svg = (out / "vs_reference.svg").read_text()
    assert "MLA off · norm on" in svg and "vs_reference.svg" in (out / "index.html").read_text()
    bad = runner.invoke(app, ["report", str(RUN), "--out", str(tmp_path / "b"), "--reference", "MLA on · norm maybe"])
    assert bad.exit_code == 2 and "--reference" in bad.output
    assert len(bad.output.strip().splitlines()) == 1

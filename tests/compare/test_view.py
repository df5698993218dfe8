"""What ``specbench compare`` prints: a cells x gated-metrics verdict table first, details behind
--verbose, cells named by axis values, a run compared with itself flagged (simulated runs, no servers)."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from specbench.cli.main import app
from specbench.testing.simruns import P

ON = {"mla": "on", "output_norm": "on"}
OFF = {"mla": "on", "output_norm": "off"}


def _cells(p_off):
    return [{"axes": ON, "p": P, "units": 40, "drafts": 25}, {"axes": OFF, "p": p_off, "units": 40, "drafts": 25}]


def run(*args):
    result = CliRunner().invoke(app, ["compare", *map(str, args)], env={"COLUMNS": "80"})
    return result.exit_code, result.output


def test_verdict_table_leads_with_one_row_per_cell(make_run):
    base = make_run("base", _cells(P), seed=1)
    cand = make_run("cand", _cells([0.60, 0.40, 0.20]), seed=2)
    code, out = run(base, cand, "--allow-inconclusive")  # the unchanged cell's checks cannot see 3% / 2pp
    assert code == 1, out
    lines = out.splitlines()
    assert lines[0].startswith("REGRESSION: ") and lines[0] == lines[-1]  # the verdict first and last
    assert lines[1].startswith("Gate checks per cell") and "40 vs 40" in lines[1]
    header = next(line for line in lines[1:] if "cell" in line and "AL" in line)
    assert all(f"p_{i}" in header for i in range(3))
    norm_off = next(line for line in lines[1:] if "norm off" in line)
    assert "FAIL" in norm_off and "pp" in norm_off
    assert "per_position[0]" not in out.split("FAIL norm")[0].split("every metric")[0]  # no detail rows
    assert len(lines) < 20 and not any(line.startswith("DAR ") for line in lines)  # no detail table


def test_verbose_adds_every_metric(make_run):
    base = make_run("base", _cells(P), seed=1)
    cand = make_run("cand", _cells(P), seed=2)
    _, short = run(base, cand)
    _, long = run(base, cand, "--verbose")
    # every metric, named as the verdict table names them (DAR, p_0), not by key
    dar = [line for line in long.splitlines() if line.startswith("DAR ")]
    assert "95% CI" in long and len(dar) == 2 and "draft_acceptance_rate" not in long  # one row a cell
    assert "DAR " not in short and len(long.splitlines()) > 2 * len(short.splitlines())


def test_a_run_compared_with_itself_is_flagged(make_run, tmp_path):
    base = make_run("base", _cells(P), seed=1)
    code, out = run(base, base, "--allow-inconclusive")  # 40 requests: weak checks
    assert code == 0 and "same path" in out and "0 by construction" in out
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    code, out = run(base, copy, "--allow-inconclusive")
    assert code == 0 and "copies of one run (base)" in out
    other = make_run("other", _cells(P), seed=1)
    assert "by construction" not in run(base, other)[1]


def test_plot_has_a_delta_panel_with_the_gate_interval_and_tolerance(make_run):
    """The Δ panel shows the interval the gate decided on (not each side's band) and the tolerance."""
    from specbench.compare import DEFAULT_GATES, compare_sides, load_side, parse_gate
    from specbench.render.plots.position_deltas import bands, delta_rows, overlay_figure

    base = load_side(make_run("base", _cells(P), seed=1))
    cand = load_side(make_run("cand", _cells([0.60, 0.40, 0.20]), seed=2))
    comp = compare_sides(base, cand, [parse_gate(g) for g in DEFAULT_GATES], default_gates=True)
    cell = next(c for c in comp.cells if c.axes.get("output_norm") == "off")
    d = delta_rows(cell)
    rows = {r.index: r for r in cell.rows if r.name.startswith("per_position[")}
    assert d.delta == [rows[i].delta for i in range(3)] and d.ci == [rows[i].ci for i in range(3)]
    assert d.tolerance == [0.02] * 3 and "fail" in d.status
    fig = overlay_figure([("norm off", bands(base.cells[cell.key].units), bands(cand.cells[cell.key].units), d)])
    top, bottom = fig.axes[:2]
    assert "Δ" in bottom.get_ylabel()
    tol = [
        seg
        for coll in bottom.collections
        for seg in coll.get_segments()
        if len(seg) == 2 and seg[0][1] == seg[1][1] and seg[0][0] != seg[1][0]
    ]
    assert sorted({round(float(seg[0][1]), 6) for seg in tol}) == [-2.0]  # -2pp, in the panel's pp units
    failed = d.status.index("fail")
    points = [line for line in bottom.get_lines() if line.get_marker() == "D"]
    assert points[failed].get_color() == "tab:red"
    assert points[failed].get_ydata()[0] == rows[failed].delta * 100

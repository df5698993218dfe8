"""What ``specbench compare`` prints: a cells x gated-metrics verdict table first, details behind
--verbose, cells named by axis values, a run compared with itself flagged (simulated runs, no servers)."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from simruns import P
from specbench.cli.main import app

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
    code, out = run(base, cand)
    assert code == 1, out
    lines = out.splitlines()
    assert lines[0].startswith("Gate checks per cell") and "40 vs 40" in lines[0]
    header = next(line for line in lines if "cell" in line and "AL" in line)
    assert all(f"p_{i}" in header for i in range(3))
    norm_off = next(line for line in lines if "norm off" in line)
    assert "FAIL" in norm_off and "pp" in norm_off
    assert "per_position[0]" not in out.split("FAIL norm")[0].split("every metric")[0]  # no detail rows
    assert len(lines) < 20 and "95% CI of delta" not in out


def test_verbose_adds_every_metric(make_run):
    base = make_run("base", _cells(P), seed=1)
    cand = make_run("cand", _cells(P), seed=2)
    _, short = run(base, cand)
    _, long = run(base, cand, "--verbose")
    assert "95% CI of delta" in long and "draft_acceptance_rate" in long
    assert "draft_acceptance_rate" not in short and len(long.splitlines()) > 2 * len(short.splitlines())


def test_a_run_compared_with_itself_is_flagged(make_run, tmp_path):
    base = make_run("base", _cells(P), seed=1)
    code, out = run(base, base)
    assert code == 0 and "same path" in out and "0 by construction" in out
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    code, out = run(base, copy)
    assert code == 0 and "copies of one run (base)" in out
    other = make_run("other", _cells(P), seed=1)
    assert "by construction" not in run(base, other)[1]

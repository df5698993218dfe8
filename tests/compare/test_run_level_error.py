"""Run-level error control: an A/A compare of the whole default study must exit 1 rarely.

The studies are drawn from the committed default study's real requests (specbench/testing/realaa.py:
the same prompts on both sides, fresh draws from each prompt's recorded accepted-length
distribution), 6 speculative cells, gated by the default gates plus ``acceptance_length:0``: 30
checks per compare. Checked per check at 2.5% (Holm only inside ``[*]`` gates), 10-18% of these
compares exited 1; with Holm over every check of the compare, the rate must stay <= 5% at 3, 5,
10 and 20 prompts per cell.

Monte Carlo error: TRIALS compares per size; at a true rate of 2.5% the estimate's SE is ~1 point,
so a rate truly at the 2.5% the correction aims for passes the 5% bound with margin (seeds fixed:
deterministic). The measured rates are in the failure message and in docs/methods.md.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from specbench.cli.exits import compare_exit
from specbench.cli.main import app
from specbench.compare import DEFAULT_GATES, compare_sides, parse_gate
from specbench.testing.realaa import BASELINE, aa_sides, population

GATES = [parse_gate(g) for g in (*DEFAULT_GATES, "acceptance_length:0")]
TRIALS = 250
LIMIT = 0.05


def _aa_exit_rates(n: int, holm: bool, gates=GATES) -> dict[int, float]:
    pop = population()
    rng = np.random.default_rng(1000 + n)
    codes = [compare_exit(compare_sides(*aa_sides(pop, n, rng), gates, holm=holm)) for _ in range(TRIALS)]
    return {code: codes.count(code) / TRIALS for code in (0, 1, 3)}


@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 5, 10, 20])
def test_whole_run_aa_exit_1_rate_at_most_5_percent(n):
    rates = _aa_exit_rates(n, holm=True)
    assert rates[1] <= LIMIT, (
        f"{n} prompts per cell: A/A exit-code rates {rates} over {TRIALS} compares of 6 cells "
        f"x {len(GATES)} gate lines (allowed exit 1 <= {LIMIT})"
    )


@pytest.mark.slow
def test_without_the_correction_the_same_studies_fail_often():
    """The simulation is sharp enough to see the problem the correction solves. With the default
    gates the per-check rate is now low on its own (the change's variance is floored at the
    within-draw variance: 0% / 0% / 0.8% / 2.4% exit 1 at 3 / 5 / 10 / 20 prompts without Holm); gating every
    statistic at 0 (AL, DAR, p_i, alpha_i: 48 checks) at 20 prompts measured 18.8% without Holm,
    0% with it (22.4% without Holm with the jackknife t alone, before the paired change took MOVER's
    limits where wider; at 10 prompts the wider limits leave 1.6% where the t alone gave 11.6%)."""
    every = [
        parse_gate(g)
        for g in ("acceptance_length:0", "draft_acceptance_rate:0", "per_position[*]:0", "conditional[*]:0")
    ]
    assert _aa_exit_rates(20, holm=False, gates=every)[1] > 0.07
    assert _aa_exit_rates(20, holm=True, gates=every)[1] <= LIMIT


def test_the_correction_and_the_number_of_checks_are_stated(tmp_path):
    cand = tmp_path / "cand"
    shutil.copytree(BASELINE, cand, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    result = CliRunner().invoke(
        app,
        [
            "compare",
            str(BASELINE),
            str(cand),
            "--gate",
            "acceptance_length:-3%",
            "--gate",
            "per_position[*]:-2pp",
            "--gate",
            "acceptance_length:0",
            "--markdown",
            str(md),
            "--json",
            str(js),
        ],
        env={"COLUMNS": "200"},
    )
    # no failure; the checks too weak for their tolerance stay in the family Holm held (issue 37)
    assert result.exit_code == 3 and "0 failed" in result.output, result.output
    said = "<= 2.5% one-sided for the whole compare, Holm over all 30 decided checks (every cell x every gate line)"
    assert said in result.output and said in md.read_text()
    data = json.loads(js.read_text())
    assert data["error_control"] == {
        "method": "holm",
        "scope": "run",
        "alpha_one_sided": 0.025,
        "checks": 30,
        "inconclusive_not_tested": 0,
    }
    controls = {g["control"] for c in data["cells"] for g in c["gates"]}
    assert controls == {"run-level: family-wise <= 2.5% one-sided over all 30 decided checks (Holm)"}


def test_a_lone_marginal_failure_of_a_plain_gate_is_corrected_across_cells():
    """Holm spans gate lines and cells: a plain (not ``[*]``) gate's one marginal failure among 12
    checks passes, with the reason in its notes."""
    from specbench.compare.cellwise import CellComparison, Comparison, GateResult
    from specbench.compare.gate_checks import holm

    def result(cell, gate, status, p):
        return GateResult(
            cell=cell,
            gate=gate,
            metric="mean_acceptance_length",
            status=status,
            message="m",
            p_value=p,
            control="per check",
        )

    cells = [
        CellComparison(
            f"c{i}",
            {},
            [],
            [],
            1,
            1,
            "request",
            gates=[
                result(f"c{i}", "acceptance_length:0", "fail" if i == 0 else "pass", 0.02 if i == 0 else 0.5),
                result(f"c{i}", "acceptance_length:-3%", "pass", 0.9),
            ],
        )
        for i in range(6)
    ]
    comp = Comparison("b", "c", cells, [], [], [], [], ["acceptance_length:0", "acceptance_length:-3%"], False, 0.95, 0)
    holm(comp, 0.025)
    assert compare_exit(comp) == 3  # not rejected by Holm: not a fail, and no pass either (its interval is past 0)
    (g,) = [g for g in comp.checks if g.cell == "c0" and g.gate == "acceptance_length:0"]
    assert g.status == "inconclusive" and "not after Holm over all 12 checks of this compare" in g.undecided

"""A pass means "known to be within tolerance" (issue 54), held at the boundaries on real outcomes.

Candidates are drawn from the real per-prompt accepted-length distributions of the committed
results/baselines/cpu-gate (the CI recipe's study, 198 prompts a cell) at the recipe's size (176
prompts, paired), with a known true harm put into the candidate's distributions
(:func:`specbench.testing.realaa.harm`): a uniform AL drop, a p_0 drop, an AL drop held by 20% of
the prompts. Seeded: the same draws every run. The error rates with their Monte Carlo error are in
benchmarks/gate_error_rates.py and docs/gate.md."""

from __future__ import annotations

import re

import numpy as np
import pytest

from specbench.cli.exits import compare_exit
from specbench.compare import compare_sides, parse_gate
from specbench.testing import BASELINES
from specbench.testing.realaa import boundary_sides, harm, population

GATES = [parse_gate("acceptance_length:-5%"), parse_gate("per_position[*]:-5pp")]
T = 0.05
RECIPE = 176
TRIALS = 20


@pytest.fixture(scope="module")
def pop():
    return population(BASELINES / "cpu-gate")


def harmed(pop, shape: str, amount: float) -> dict:
    # AL drops live in the norm-on cells (the norm-off ones have AL ~1.5: 20% of their prompts
    # cannot carry 2T); a p_0 drop in every cell
    return {cid: harm(c, shape, amount) for cid, c in pop.items() if shape == "p0" or c["axes"]["output_norm"] == "on"}


def codes(pop, shape: str, amount: float, seed: int, n: int = RECIPE, trials: int = TRIALS) -> list[int]:
    rng = np.random.default_rng(seed)
    cand = harmed(pop, shape, amount) if amount else {}
    return [
        compare_exit(compare_sides(*boundary_sides(pop, cand, n, rng), GATES, n_resamples=200)) for _ in range(trials)
    ]


@pytest.mark.heavy
@pytest.mark.parametrize("shape", ["al", "p0", "al-20%"])
def test_a_true_drop_of_exactly_the_tolerance_is_never_a_pass(pop, shape):
    """Was "no regression: 16 passed" for a true AL drop of 5.1% under a 5% gate: a check failed only
    when its whole interval lay past T. Now a pass needs the interval's upper end within T, so a
    true harm of T passes with probability <= 2.5% per check."""
    got = codes(pop, shape, T, seed=11)
    assert got.count(0) == 0, got


@pytest.mark.heavy
@pytest.mark.parametrize("shape", ["al", "p0", "al-20%"])
def test_a_true_drop_of_twice_the_tolerance_fails(pop, shape):
    got = codes(pop, shape, 2 * T, seed=12, trials=2 * TRIALS)
    assert got.count(1) >= 0.8 * len(got), got


@pytest.mark.heavy
def test_no_change_passes_at_the_recipe_size_and_never_fails(pop):
    got = codes(pop, "al", 0.0, seed=13)
    assert got.count(1) == 0 and got.count(0) >= 0.8 * TRIALS, got


def test_checks_that_cannot_fail_are_counted_apart(pop):
    """p_1 / p_2 of the norm-off cells are ~0 in the baseline: no candidate can drop them 5pp. They
    pass (nothing they guard can happen) but the headline does not count them as passes."""
    from specbench.compare.text import headline

    comp = compare_sides(*boundary_sides(pop, {}, RECIPE, np.random.default_rng(3)), GATES, n_resamples=200)
    vacuous = [g for g in comp.checks if g.cannot_fail]
    assert {(g.cell.split(", ")[1], g.metric) for g in vacuous} == {
        ("output_norm=off", "per_position[1]"),
        ("output_norm=off", "per_position[2]"),
    }
    assert comp.counts["cannot_fail"] == len(vacuous) == 4
    assert comp.counts["pass"] == sum(1 for g in comp.checks if g.status == "pass") - 4
    assert "4 cannot fail" in headline(comp) and f"{comp.counts['pass']} passed" in headline(comp)


@pytest.mark.heavy
def test_needs_n_decides_at_the_printed_n(pop):
    """At 20 prompts the undecided checks say "needs ~N prompts"; drawn again at that N (the same
    truth: no change), the check decides (passes) in >= 70% of draws."""
    rng = np.random.default_rng(5)
    asked: list[tuple[str, str, int]] = []
    while len(asked) < 6:
        comp = compare_sides(*boundary_sides(pop, {}, 20, rng), GATES, n_resamples=200)
        asked += [
            (g.cell, g.metric, int(n))
            for g in comp.checks
            for n in re.findall(r"needs ~(\d+) prompts", g.undecided)
            if int(n) <= 198  # the population holds 198 prompts a cell
        ]
    decided = 0
    trials = 0
    for cell, metric, n in asked[:6]:
        for _ in range(10):
            comp = compare_sides(*boundary_sides(pop, {}, n, rng), GATES, n_resamples=200)
            (g,) = [g for g in comp.checks if g.cell == cell and g.metric == metric]
            decided += g.status != "inconclusive"
            trials += 1
    assert decided >= 0.7 * trials, (decided, trials, asked[:6])


def test_a_sized_candidate_that_lost_some_of_its_prompts_gets_a_verdict(pop):
    """A gate-sized candidate sends the first 176 of the baseline's 198 prompts; the 22 it never sent
    are left out by design, not "unmatched". Losing 15% of the prompts it sent (every request
    errored) still gets a verdict, and the reason names the lost prompts when it is too many."""
    from dataclasses import replace

    from specbench.records.requests import requests_of

    base, cand = boundary_sides(pop, {}, 198, np.random.default_rng(7))

    def thinned(cell, lose: float):
        ids = [r.prompt_id for r in cell.requests]
        sent, lost = ids[:176], set(ids[: round(lose * 176)])
        keep = [r for r in cell.requests if r.prompt_id in sent and r.prompt_id not in lost]
        errors = requests_of([{"prompt_id": p, "error": "HTTP 500"} for p in sorted(lost)])
        units = [u for u, r in zip(cell.units, cell.requests) if r.prompt_id in sent and r.prompt_id not in lost]
        return replace(cell, requests=keep + errors, units=units)

    for lose, decided in ((0.15, True), (0.30, False)):
        side = replace(cand, cells={k: thinned(c, lose) for k, c in cand.cells.items()})
        comp = compare_sides(base, side, GATES, n_resamples=200)
        blocked = [b.reason for c in comp.cells for b in c.blocks]
        assert bool(blocked) != decided, (lose, blocked[:1])
        if not decided:
            assert "of the 176 baseline prompts the candidate sent have no finished request" in blocked[0]
            assert (
                "22 more it never sent: left out by design" in blocked[0]
                and "because every request errored" in blocked[0]
            )
        else:
            assert "did not send (left out by design)" in comp.cells[0].pairing.description

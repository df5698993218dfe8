"""Bootstrap CIs: determinism, degenerate single unit, coverage on simulated streams, speed."""

import time

import numpy as np
import pytest

from specbench.analysis.intervals import bootstrap, bootstrap_delta, point_estimates, significant
from specbench.records.counts import Counts

K = 3


def simulate(rng, alpha, n_units, drafts_per_unit):
    """Windows of drafts whose accepted prefix grows while each next token is accepted w.p. alpha."""
    units = []
    for _ in range(n_units):
        accepted = rng.random((drafts_per_unit, K)) < alpha
        prefix = np.cumprod(accepted, axis=1)  # a token counts only if all before it were accepted
        pos = prefix.sum(axis=0).astype(int).tolist()
        units.append(Counts(drafts_per_unit, drafts_per_unit * K, sum(pos), pos, K))
    return units


def test_deterministic_in_seed():
    units = simulate(np.random.default_rng(1), 0.7, 30, 20)
    assert bootstrap(units, seed=3) == bootstrap(units, seed=3)
    assert bootstrap(units, seed=3) != bootstrap(units, seed=4)


def test_keys_and_intervals_contain_point():
    units = simulate(np.random.default_rng(2), 0.7, 30, 20)
    ci = bootstrap(units)
    assert set(ci) == {"mean_acceptance_length", "draft_acceptance_rate", "p0", "p1", "p2", "a0", "a1", "a2"}
    pooled = point_estimates(units)
    d = sum(u.num_drafts for u in units)
    assert pooled["mean_acceptance_length"] == pytest.approx(1 + sum(u.accepted_tokens for u in units) / d)
    for key, (lo, hi) in ci.items():
        assert lo <= pooled[key] <= hi, key
    assert ci.n_units == 30 and not ci.degenerate


def test_single_unit_is_degenerate_not_precise():
    u = Counts(93, 279, 163, [72, 54, 37], 3)
    ci = bootstrap([u])
    assert ci.degenerate and ci.n_units == 1
    assert ci["mean_acceptance_length"] == (1 + 163 / 93, 1 + 163 / 93)


@pytest.mark.heavy
def test_coverage_on_bernoulli_streams():
    # True values: p0 = alpha, AL = 1 + alpha + alpha^2 + alpha^3.
    alpha, reps = 0.713, 200  # alpha off the 1/400 lattice of p0 values
    true = {"p0": alpha, "mean_acceptance_length": 1 + alpha + alpha**2 + alpha**3}
    rng = np.random.default_rng(123)
    hits = {k: 0 for k in true}
    for rep in range(reps):
        ci = bootstrap(simulate(rng, alpha, 40, 10), n_resamples=400, seed=rep)
        for k, v in true.items():
            lo, hi = ci[k]
            hits[k] += lo <= v <= hi
    for k in true:
        coverage = hits[k] / reps
        assert 0.87 <= coverage <= 0.995, (k, coverage)


def test_speed_2000_resamples_of_1000_units():
    units = simulate(np.random.default_rng(0), 0.6, 1000, 5)
    t0 = time.perf_counter()
    bootstrap(units, n_resamples=2000)
    assert time.perf_counter() - t0 < 1.0


def test_delta_detects_real_difference_and_not_noise():
    rng = np.random.default_rng(5)
    on, off, on2 = simulate(rng, 0.75, 30, 20), simulate(rng, 0.5, 30, 20), simulate(rng, 0.75, 30, 20)
    d = bootstrap_delta(on, off)
    assert d.point["mean_acceptance_length"] == pytest.approx(
        point_estimates(off)["mean_acceptance_length"] - point_estimates(on)["mean_acceptance_length"]
    )
    assert d["mean_acceptance_length"][1] < 0 and significant(d["p0"])
    same = bootstrap_delta(on, on2)
    assert not significant(same["mean_acceptance_length"])


def test_delta_with_single_unit_side_is_marked():
    rng = np.random.default_rng(6)
    d = bootstrap_delta(simulate(rng, 0.7, 1, 50), simulate(rng, 0.7, 20, 50))
    assert d.degenerate


def test_empty_is_an_error():
    with pytest.raises(ValueError):
        bootstrap([])

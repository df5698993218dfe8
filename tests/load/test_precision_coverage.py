"""Coverage of the final CI of a precision-driven load (specbench/load/precision.py), by simulation.

Stopping when the CI is narrow enough reads only the interval's width, so the final CI keeps its
level; stopping when the result "looks good" does not. Both are simulated through the real loop
(:func:`run_until` with the real bootstrap), no vLLM: each simulated request is a run of verify
steps at k = 3 until 64 tokens are emitted, with its own acceptance probability drawn from a Beta
fitted to the committed default study's per-request counts (mla on, output norm off: per-request
p_0 0.63 +- 0.14 over ~29 drafts, where the binomial alone gives +- 0.09: overdispersed, between-
request sd 0.11 -> Beta(11.5, 6.8)). A pool of requests is generated once; the true AL is the
pool's pooled AL (studies draw from the pool with replacement, so that is their estimand).

Measured here (1000 studies, MC SE 0.7 pp): width rule 93.2% at ~79 requests on average; the same
jackknife-t interval at a fixed 20-100 requests 94.3-95.4%; the percentile bootstrap (what a
cell's acceptance.json prints) under the same width rule 90.5-91.2%, fixed 92-94%. The peeking
rule below: 79.7%.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specbench.analysis.intervals import point_estimates
from specbench.analysis.stop_rule import MIN_REQUESTS_FLOOR, Look, half_widths, precise_enough
from specbench.load.precision import Batch, run_until
from specbench.records.counts import Counts

K, MAX_TOKENS = 3, 64
N_STUDIES = 1000
TARGET = 0.1  # AL half-width: stops after ~80 requests (5-8 looks)
MIN_REQUESTS = 20
KEY = "mean_acceptance_length"
DATA = Path(__file__).parent / "data" / "default_study_request_units.json"


def request_pool(n: int, a: float, b: float, seed: int) -> np.ndarray:
    """(n, 3 + K) rows [drafts, draft_tokens, accepted, acc_pos_0..K-1], one simulated request each."""
    rng = np.random.default_rng(seed)
    q = rng.beta(a, b, size=n)[:, None, None]
    steps = MAX_TOKENS  # at most one step per token
    accepted = np.cumprod(rng.random((n, steps, K)) < q, axis=2)  # acceptance is a prefix
    j = accepted.sum(axis=2)  # draft tokens accepted per step
    emitted_before = np.cumsum(j + 1, axis=1) - (j + 1)
    live = emitted_before < MAX_TOKENS
    d = live.sum(axis=1)
    pos = (accepted * live[:, :, None]).sum(axis=1)
    return np.column_stack([d, d * K, (j * live).sum(axis=1), pos]).astype(int)


def _counts(row) -> Counts:
    return Counts(int(row[0]), int(row[1]), int(row[2]), [int(x) for x in row[3:]], K)


def _simulate(pool: list[Counts], truth: float, rule, n_studies: int = N_STUDIES) -> tuple[float, float]:
    """(coverage of the final CI, mean requests sent) over ``n_studies`` precision-driven loads."""
    rng = np.random.default_rng(1)
    covered, sent = 0, 0
    for _s in range(n_studies):

        def send(start: int, n: int) -> Batch:
            idx = rng.integers(0, len(pool), n)
            return Batch([{}] * n, [(f"r{start + i}", pool[j]) for i, j in enumerate(idx)])

        batches, out = run_until(
            send, {"acceptance_length": TARGET}, max_requests=400, batch=10, min_requests=MIN_REQUESTS, rule=rule
        )
        units = [u for b in batches for _, u in b.request_units]
        (h,), point = half_widths(units, [KEY])[0].values(), point_estimates(units)[KEY]  # the final CI
        covered += abs(point - truth) <= h
        sent += out.requests_sent
    return covered / n_studies, sent / n_studies


@pytest.fixture(scope="module")
def population() -> tuple[list[Counts], float]:
    rows = request_pool(4000, 11.5, 6.8, seed=0)
    pool = [_counts(r) for r in rows]
    return pool, point_estimates(pool)[KEY]


def test_pool_is_as_overdispersed_as_the_default_study(population):
    """The simulated requests spread like the measured ones (so the coverage below is about them)."""
    measured = np.asarray(json.loads(DATA.read_text())["cells"]["mla-on__output_norm-off__r0"], dtype=float)
    pool, _ = population
    sim = np.asarray([[u.num_drafts, u.accepted_per_position[0]] for u in pool], dtype=float)
    p0_measured, p0_sim = measured[:, 3] / measured[:, 0], sim[:, 1] / sim[:, 0]
    assert abs(p0_sim.mean() - p0_measured.mean()) < 0.03
    assert 0.7 * p0_measured.std() < p0_sim.std() < 1.3 * p0_measured.std()
    assert abs(sim[:, 0].mean() - measured[:, 0].mean()) < 3


@pytest.mark.slow  # 1,000 simulated precision-driven loads
def test_stopping_on_width_keeps_the_nominal_coverage(population):
    pool, truth = population
    coverage, mean_sent = _simulate(pool, truth, precise_enough)
    mc = 3 * np.sqrt(0.95 * 0.05 / N_STUDIES)  # three Monte Carlo standard errors: +-2.1 pp
    print(f"coverage {coverage:.3f}, mean requests {mean_sent:.1f}")
    assert abs(coverage - 0.95) <= mc, f"coverage {coverage:.3f} after {mean_sent:.0f} requests on average"
    assert 20 < mean_sent < 400  # it did stop on precision, after a varying number of batches


@pytest.mark.slow  # 2 x 400 simulated precision-driven loads
def test_stopping_when_the_result_looks_significant_breaks_coverage(population):
    """The mutation the rule must never make: peek at the estimate. Here a user stops as soon as the
    CI excludes a reference AL that is in fact the true one (an A/A comparison: "sampling to a
    foregone conclusion"), else on width; the final CI then misses the truth far more than 5%."""
    pool, truth = population

    def peeking(look: Look, targets: dict[str, float]) -> bool:
        p, w = look.point.get(KEY), look.half_widths.get(KEY)
        return (p is not None and w is not None and abs(p - truth) > w) or precise_enough(look, targets)

    coverage, mean_sent = _simulate(pool, truth, peeking, n_studies=400)
    honest, _ = _simulate(pool, truth, precise_enough, n_studies=400)
    print(f"peeking: coverage {coverage:.3f}, mean requests {mean_sent:.1f}; on width alone {honest:.3f}")
    # The per-cell interval is conservative (the honest rule covers ~94-95%, the test above), so
    # the loss is measured against the honest rule on the same pool: measured 0.825 vs 0.945.
    assert coverage < honest - 0.025 and coverage < 0.95, (coverage, honest)


# --- the floor on min_requests, on committed requests, with a look after every request -------------
RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"


def _committed_pool(cell: str) -> list[Counts]:
    rows = [json.loads(line) for line in (RUN / cell / "requests.jsonl").read_text().splitlines() if line.strip()]
    return [Counts.from_dict(r["spec_decode"]) for r in rows if r.get("spec_decode") and not r.get("error")]


def _coverage_batch1(pool: list[Counts], min_requests: int, target: float, studies: int) -> float:
    """Share of final per-cell CIs (the loop's own units) covering the pool's AL; batch 1, real loop."""
    rng = np.random.default_rng(3)
    truth = point_estimates(pool)[KEY]
    hit = 0
    for _ in range(studies):

        def send(start: int, n: int) -> Batch:
            return Batch([{}] * n, [(f"r{start + i}", pool[j]) for i, j in enumerate(rng.integers(0, len(pool), n))])

        batches, _ = run_until(
            send, {"acceptance_length": target}, max_requests=400, batch=1, min_requests=min_requests
        )
        units = [u for b in batches for _, u in b.request_units]
        (h,), point = half_widths(units, [KEY])[0].values(), point_estimates(units)[KEY]
        hit += abs(point - truth) <= h
    return hit / studies


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["mla-on__output_norm-on__r0", "mla-on__output_norm-logits-only__r0"])
def test_optional_stopping_keeps_coverage_at_the_floor_and_below_it(cell):
    """Against the committed default study's requests, looking after every request (batch 1: the most
    optional stopping the config allows), at the half-width where small first looks do worst (±0.1):
    at the config's floor (MIN_REQUESTS_FLOOR) and at a first look after 2 requests. With the
    jackknife-t interval of before, min_requests 2 covered 73% here and the floor 93-96%
    (benchmarks/precision_coverage.py); the per-cell score interval keeps both >= 93% (measured
    95-98%, 400 studies: the check allows two Monte Carlo SEs below 93%). The floor stays: it was
    what held coverage under the jackknife-t, and it is what the docs promise."""
    pool = _committed_pool(cell)
    assert len(pool) == 20
    for min_requests in (2, MIN_REQUESTS_FLOOR):
        coverage = _coverage_batch1(pool, min_requests, 0.1, studies=400)
        print(f"{cell}: coverage {coverage:.3f} at min_requests {min_requests}")
        assert coverage >= 0.93 - 2 * np.sqrt(0.93 * 0.07 / 400), (min_requests, coverage)

"""The speed-up gate keeps its level at 2-20 requests per cell (issue 29).

A/A checks drawn from the committed default study's real requests (specbench/testing/realspeed.py):
both sides draw their prompts from the same cell pair, so the true change is 0. The percentile
bootstrap it replaced false-alarmed 50.8% / 12.5% / 11.0% / 8.8% one-sided at 1 / 2 / 3 / 5
requests (nominal 2.5%; issue 29). Target: <= nominal + 1 point at >= 2 requests; 1 request per
side gives no interval. Measured with this seed (150 trials x 6 cells per size): see the asserts'
messages; benchmarks/gate_error_rates.py prints the same figures with more trials.
"""

from __future__ import annotations

import numpy as np
import pytest

from specbench.testing.realspeed import speedup_aa, speedup_population

POP = speedup_population()
TRIALS = 150  # x 6 cells = 900 A/A checks per size: Monte Carlo SE ~0.5 points at 2.5%


@pytest.mark.slow  # an A/A simulation per size
@pytest.mark.parametrize("n", [2, 3, 5, 10, 20])
def test_speedup_aa_false_alarms_at_most_nominal_plus_one_point(n):
    harm, other, none = speedup_aa(POP, n, TRIALS, np.random.default_rng(20261204 + n))
    assert none == 0.0
    assert harm <= 0.035 and other <= 0.035, (harm, other)


def test_one_request_per_side_gives_no_interval():
    harm, other, none = speedup_aa(POP, 1, 5, np.random.default_rng(1))
    assert (harm, other, none) == (0.0, 0.0, 1.0)

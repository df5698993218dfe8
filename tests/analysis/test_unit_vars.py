"""The per-cell interval's variances, computed for every statistic at once (analysis/intervals.py
``_unit_vars``, ``jackknife_vars``; analysis/deltas.py ``_correlations``), against their definitions
written out one statistic and one unit at a time in plain Python.

``_unit_vars``: per statistic, the jackknife variance of sum(x) / sum(y) over the units with
trials (y > 0) plus two pseudo-units of their average size, shrunk by min(1, 10 / units): one with
no success (0 of size) and one with all (size of size)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.deltas import _correlations
from specbench.analysis.intervals import PSEUDO_UNITS_UP_TO, _unit_vars, jackknife_var, jackknife_vars


def _definition(x: list[float], y: list[float]) -> float:
    units = [(a, b) for a, b in zip(x, y) if b > 0]
    n = len(units)
    size = math.fsum(b for _, b in units) / n * min(1.0, PSEUDO_UNITS_UP_TO / n)
    units += [(0.0, size), (size, size)]
    sx, sy = math.fsum(a for a, _ in units), math.fsum(b for _, b in units)
    return _jackknife_definition([(sx - a) / (sy - b) for a, b in units])


def _matrices(rng: np.random.Generator, n: int, stats: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 40, size=(n, stats)).astype(float)
    y[rng.random((n, stats)) < 0.2] = 0.0  # units without trials for a statistic are left out
    x = np.floor(y * rng.random((n, stats)))
    return x, y


@pytest.mark.parametrize("n", [2, 3, 7, 10, 11, 40])
def test_unit_vars_are_the_definition_for_every_statistic(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        x, y = _matrices(rng, n, 7)
        got = _unit_vars(x, y)
        for col in range(7):
            if np.count_nonzero(y[:, col]) < 2:
                continue  # cell_intervals gives no interval there and does not read it
            want = _definition(x[:, col].tolist(), y[:, col].tolist())
            assert got[col] == pytest.approx(want, rel=1e-9, abs=1e-15), (n, col)


def _jackknife_definition(loo: list[float]) -> float:
    mean = math.fsum(loo) / len(loo)
    return (len(loo) - 1) / len(loo) * math.fsum((v - mean) ** 2 for v in loo)


def test_jackknife_vars_are_the_one_statistic_variance_per_column():
    loo = np.random.default_rng(5).random((12, 6))
    want = [_jackknife_definition(loo[:, c].tolist()) for c in range(6)]
    assert jackknife_vars(loo) == pytest.approx(want, rel=1e-12)
    assert jackknife_var(loo[:, 2]) == pytest.approx(want[2], rel=1e-12)


def test_correlations_are_pearson_per_column_and_0_without_spread():
    rng = np.random.default_rng(9)
    b, c = rng.random((15, 4)), rng.random((15, 4))
    c[:, 1] = 2 * b[:, 1] + 1  # perfectly correlated
    c[:, 2] = 0.5  # no spread on one side: nothing to correlate
    b[:, 3] = np.nan  # not finite
    got = _correlations(b, c)
    assert got[0] == pytest.approx(np.corrcoef(b[:, 0], c[:, 0])[0, 1], rel=1e-12)
    assert got[1] == pytest.approx(1.0) and got[2] == 0.0 and got[3] == 0.0

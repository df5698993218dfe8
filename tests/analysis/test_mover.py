"""MOVER limits of a difference (analysis/deltas.py ``_mover``) against published values.

Newcombe (1998), Stat. Med. 17:873, Table II, method 10 (Wilson score intervals combined, the
independent case r = 0): 56/70 - 48/80 has limits 0.0524 and 0.3339; 9/10 - 3/10 has 0.1705 and
0.8090. The Wilson intervals come from the per-cell interval's own score function.
"""

from __future__ import annotations

import pytest

from specbench.analysis.deltas import _mover
from specbench.analysis.intervals import _score

Z = 1.959964  # the normal 97.5% quantile Newcombe uses


@pytest.mark.parametrize(
    ("xc", "nc", "xb", "nb", "limits"), [(56, 70, 48, 80, (0.0524, 0.3339)), (9, 10, 3, 10, (0.1705, 0.8090))]
)
def test_independent_mover_matches_newcombe(xc, nc, xb, nb, limits):
    lo, hi = _mover(xb / nb, xc / nc, _score(xb / nb, nb, Z), _score(xc / nc, nc, Z), 0.0)
    assert (round(lo, 4), round(hi, 4)) == limits


def test_a_positive_pairing_correlation_narrows_and_a_full_one_leaves_the_gap_of_the_sides():
    b, c = (0.40, 0.60), (0.55, 0.85)  # sides around 0.5 and 0.7
    lo0, hi0 = _mover(0.5, 0.7, b, c, 0.0)
    lo, hi = _mover(0.5, 0.7, b, c, 0.6)
    assert lo0 < lo < 0.2 < hi < hi0
    # r = 1: each limit is the difference of the two sides' distances, |0.15 - 0.10|, |0.15 - 0.10|
    assert _mover(0.5, 0.7, b, c, 1.0) == pytest.approx((0.15, 0.25))

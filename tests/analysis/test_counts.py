"""Counts/Acceptance: statistics checked against hand calculation (docs/methods.md definitions)."""

import math

import pytest

from specbench.analysis.rates import acceptance, total
from specbench.records.counts import Counts


def test_seed_line_hand_calculation():
    # Accepted 163, Drafted 279, k=3 -> D = 93; AL = 1 + 163/93 = 2.7527 (vLLM printed 2.75)
    acc = acceptance(Counts(93, 279, 163, [72, 54, 37], 3))
    assert acc.mean_acceptance_length == pytest.approx(2.752688, abs=1e-6)
    assert round(acc.mean_acceptance_length, 2) == 2.75
    assert acc.draft_acceptance_rate == pytest.approx(163 / 279)
    assert acc.per_position == pytest.approx([72 / 93, 54 / 93, 37 / 93])
    assert acc.conditional == pytest.approx([72 / 93, 54 / 72, 37 / 54])
    # invariants hold: AL = 1 + sum p_i, DAR = (AL - 1)/k
    assert acc.mean_acceptance_length == pytest.approx(1 + sum(acc.per_position))
    assert acc.draft_acceptance_rate == pytest.approx((acc.mean_acceptance_length - 1) / 3)
    assert acc.warnings == []


def test_sum_is_fieldwise_and_keeps_positions():
    s = Counts(10, 30, 20, [8, 7, 5], 3) + Counts(90, 270, 45, [30, 10, 5], 3)
    assert (s.num_drafts, s.draft_tokens, s.accepted_tokens) == (100, 300, 65)
    assert s.accepted_per_position == [38, 17, 10]
    assert s.num_spec_tokens == 3
    assert total([Counts(1, 3, 2, [1, 1, 0], 3)] * 3).accepted_tokens == 6
    assert total([Counts(1, 3, 2), Counts(2, 6, 1)]).num_drafts == 3
    assert total([]) is None  # the one way to sum Counts: nothing to sum is no counts, not zeros


def test_sum_drops_positions_of_mixed_lengths():
    s = Counts(1, 3, 2, [1, 1, 0], 3) + Counts(1, 2, 1, [1, 0], 2)
    assert s.accepted_per_position is None
    assert s.num_spec_tokens is None


def test_invariant_violations_warn():
    acc = acceptance(Counts(100, 300, 90, [30, 40, 10], 3))  # p_1 > p_0, sum 80 != 90
    text = " ".join(acc.warnings)
    assert "increases with position" in text
    assert "sum of accepted_per_position 80" in text


def test_no_drafts_is_nan_with_warning():
    acc = acceptance(Counts(0, 0, 0, [0, 0], 2))
    assert math.isnan(acc.mean_acceptance_length)
    assert acc.warnings and "no drafts" in acc.warnings[0]


def test_dict_roundtrip():
    c = Counts(93, 279, 163, [72, 54, 37], 3, derived=("num_drafts",))
    back = Counts.from_dict(c.to_dict())
    assert back == c


def test_invalid_counts_are_named():
    from specbench.records.counts import invalid_reason

    assert invalid_reason(Counts(10, 30, 15, [8, 5, 2])) is None
    assert invalid_reason(Counts(-1, 30, 15, [8, 5, 2])) == "negative count: num_drafts -1"
    assert invalid_reason(Counts(10, 30, 31, [10, 10, 11])) == "accepted_tokens 31 > draft_tokens 30"
    assert invalid_reason(Counts(10, 30, 15, [11, 3, 1])).startswith("p_0 > 1")
    assert invalid_reason(Counts(10, 30, 15, [8, -5, 2])) == "negative count: accepted_per_position[1] -5"

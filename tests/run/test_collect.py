"""specbench/run/collect.py: the three sources, their exact agreement, and acceptance.json."""

from __future__ import annotations

import pytest

from specbench.records.counts import Counts
from specbench.run import collect


def C(d, a, pos, k=3):
    return Counts(num_drafts=d, draft_tokens=k * d, accepted_tokens=a, accepted_per_position=pos, num_spec_tokens=k)


def test_diff_counts_subtracts_each_field():
    after, before = C(150, 200, [110, 60, 30]), C(50, 70, [40, 20, 10])
    d = collect.diff_counts(after, before)
    assert (d.num_drafts, d.draft_tokens, d.accepted_tokens, d.accepted_per_position) == (100, 300, 130, [70, 40, 20])
    assert collect.diff_counts(after, None) is after
    assert collect.diff_counts(None, before) is None


def test_counts_equal_is_exact_and_names_fields():
    ok, details = collect.counts_equal(C(10, 12, [7, 4, 1]), C(10, 12, [7, 4, 1]))
    assert ok and details == {}
    ok, details = collect.counts_equal(C(10, 12, [7, 4, 1]), C(10, 13, [7, 4, 2]))
    assert not ok and set(details) == {"accepted_tokens", "accepted_per_position"}
    assert details["accepted_tokens"] == [12, 13]


def test_request_units_skip_failed_and_need_every_success():
    reqs = [
        {
            "id": 0,
            "error": None,
            "spec_decode": {
                "num_drafts": 5,
                "draft_tokens": 15,
                "accepted_tokens": 6,
                "accepted_per_position": [4, 2, 0],
            },
        },
        {"id": 1, "error": "HTTP 500", "spec_decode": None},
    ]
    units = collect.request_units(reqs)
    assert len(units) == 1 and units[0].accepted_tokens == 6
    reqs.append({"id": 2, "error": None, "spec_decode": None})
    assert collect.request_units(reqs) is None


def test_build_acceptance_agreement_and_ci_unit():
    windows = [C(40, 50, [30, 15, 5]), C(60, 80, [45, 25, 10])]
    prom = windows[0] + windows[1]
    reqs = [C(25, 30, [18, 9, 3]), C(25, 35, [20, 10, 5]), C(50, 65, [37, 21, 7])]
    acc = collect.build_acceptance(
        num_spec_tokens=3, prom=prom, windows=windows, window_warnings=[], req_units=reqs, per_request_mode="auto"
    )
    assert acc.agreement.dump() == {"logs_vs_prometheus": True, "per_request_vs_prometheus": True, "details": {}}
    assert acc.derived.mean_acceptance_length == pytest.approx(1 + 130 / 100)
    assert acc.derived.per_position == pytest.approx([0.75, 0.40, 0.15])
    assert acc.derived.conditional == pytest.approx([0.75, 0.40 / 0.75, 0.15 / 0.40])
    assert acc.ci.unit == "request" and acc.ci.n_units == 3
    lo, hi = acc.ci.intervals["p0"]
    assert lo <= 0.75 <= hi
    assert len(acc.logs.windows) == 2 and acc.per_request.counts.num_drafts == 100

    off = collect.build_acceptance(
        num_spec_tokens=3, prom=prom, windows=windows[:1], window_warnings=[], req_units=reqs, per_request_mode="off"
    )
    assert off.per_request is None and off.agreement.per_request_vs_prometheus is None
    assert off.agreement.logs_vs_prometheus is False
    assert off.agreement.details["logs"].num_drafts == [40, 100]
    assert off.ci.unit == "total" and off.ci.degenerate  # one window is no sample: records.files.ci_units


def test_baseline_acceptance_flags_spec_activity():
    ok = collect.baseline_acceptance(None, None, [])
    assert ok.baseline_ok and ok.spec_metrics == "absent"
    zero = collect.baseline_acceptance(C(0, 0, [0, 0, 0]), C(0, 0, [0, 0, 0]), [])
    assert zero.baseline_ok and zero.spec_metrics == "zero"
    bad = collect.baseline_acceptance(C(0, 0, [0, 0, 0]), C(5, 6, [3, 2, 1]), [])
    assert not bad.baseline_ok and bad.warnings


def test_counter_reset_is_flagged_not_measured():
    """A counter that went back between the scrapes (server restart) diffs to negative counts: the
    record keeps them as evidence, says why, and derives no figures and no CI from them."""
    before, after = C(150, 200, [110, 60, 30]), C(40, 50, [30, 15, 5])  # 'after' restarted from zero
    prom = collect.diff_counts(after, before)
    assert prom.num_drafts == -110
    why = collect.reset_problem(prom)
    assert why and "negative count" in why and "re-run the cell" in why
    acc = collect.build_acceptance(
        num_spec_tokens=3,
        prom=prom,
        windows=[C(40, 50, [30, 15, 5])],
        window_warnings=[],
        req_units=None,
        per_request_mode="auto",
    )
    assert why in acc.warnings
    assert acc.derived.dump() == {} and acc.ci is None
    assert acc.prometheus.counts.num_drafts == -110
    assert collect.reset_problem(C(40, 50, [30, 15, 5])) is None
    base = collect.baseline_acceptance(C(5, 6, [3, 2, 1]), C(0, 0, [0, 0, 0]), [])
    assert not base.baseline_ok and any("counter went back" in w for w in base.warnings)

"""specbench/analysis/divergence.py on hand-made outputs and per-step arrays, checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specbench.analysis.acceptance import point_estimates
from specbench.analysis.divergence import common_prefix_intervals, compare_outputs, first_divergence, step_counts
from specbench.analysis.rates import total
from specbench.records.requests import SpecDecode

ROOT = Path(__file__).resolve().parents[2]


def _spec(acc: list[int], k: int = 3) -> dict:
    per_pos = [sum(1 for a in acc if a > i) for i in range(k)]
    return {
        "num_spec_tokens": k,
        "num_drafts": len(acc),
        "draft_tokens": k * len(acc),
        "accepted_tokens": sum(acc),
        "accepted_per_position": per_pos,
        "per_step_accepted": acc,
        "per_step_drafted": [k] * len(acc),
    }


def _row(i: int, tokens: list[int], spec: dict | None = None, prompt: str | None = None) -> dict:
    return {
        "id": i,
        "prompt_id": prompt or f"p{i}",
        "token_ids": tokens,
        "text": "",
        "error": None,
        "spec_decode": spec,
    }


def test_first_divergence_cases():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([5], [6]) == 0
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # strict prefix: diverges where the shorter stops
    assert first_divergence("abc", "abd") == 2


def test_step_counts_keep_the_steps_that_start_inside_the_prefix():
    # token 0 from prefill; steps emit 1+a tokens: [1,2] [3] [4,5,6,7] [8,9] -> start at 1, 3, 4, 8
    spec = SpecDecode.model_validate(_spec([1, 0, 3, 1]))
    n = 10
    whole = step_counts(spec, n, None)
    assert (whole.num_drafts, whole.accepted_tokens, whole.accepted_per_position) == (4, 5, [3, 1, 1])
    # diverging at position 5 keeps the steps starting at 1, 3 and 4 -- also the one that straddles
    # the divergence (tokens 4..7): dropping it would favour short steps
    pre = step_counts(spec, n, 5)
    assert (pre.num_drafts, pre.draft_tokens, pre.accepted_tokens, pre.accepted_per_position) == (3, 9, 4, [2, 1, 1])
    assert step_counts(spec, n, 4).num_drafts == 2  # a step starting at the divergence does not count
    assert step_counts(spec, n, 3).num_drafts == 1
    assert step_counts(spec, n, 1).num_drafts == 0  # token 1 already differs: no step verified shared text
    assert step_counts(spec, n, 0).num_drafts == 0


def test_step_counts_clip_the_last_step_at_max_tokens_and_refuse_unaligned():
    raw = _spec([3, 3])  # 1 + 4 + 4 = 9 tokens if not cut; cut at 7 (2 clipped, <= k); start at 1, 5
    spec = SpecDecode.model_validate(raw)
    assert step_counts(spec, 7, None).num_drafts == 2
    assert step_counts(spec, 7, 7).num_drafts == 2
    assert step_counts(spec, 7, 6).num_drafts == 2
    assert step_counts(spec, 7, 5).num_drafts == 1
    assert step_counts(spec, 12, None) is None  # steps account for 9 tokens, not 12
    assert step_counts(SpecDecode.model_validate({**raw, "per_step_accepted": None}), 7, None) is None  # summary level
    assert step_counts(None, 7, None) is None  # no spec_decode


def test_pairs_identical_diverging_and_mismatched_prompts():
    a = [
        _row(0, [1, 2, 3, 4, 5], _spec([1, 2])),
        _row(1, [1, 2, 3, 4, 5], _spec([3, 0])),
        _row(2, [7, 7], _spec([0])),
        _row(3, [1, 1], None),
    ]
    b = [
        _row(0, [1, 2, 3, 4, 5], _spec([0, 0, 1])),
        _row(1, [1, 2, 9, 9, 9], _spec([0, 1, 0])),
        _row(2, [7, 7], _spec([0]), prompt="other"),
        _row(3, [1, 1], None),
    ]
    p = compare_outputs("A", a, "B", b)
    assert (p.n, p.identical, p.mismatched, p.positions) == (3, 2, 1, [2])
    assert abs(p.identical_share - 2 / 3) < 1e-12
    # A's common prefix: request 0 whole (identical), request 1 (diverges at 2): its first step starts
    # at 1, inside [0, 2), and counts whole (3 accepted); request 3 has no speculation
    common_a = total(p.acc_a.common)
    assert (common_a.num_drafts, common_a.accepted_tokens) == (3, 6)
    # B's request 1: steps [0, 1, 0] start at 1, 2, 4 -> only the first starts inside [0, 2)
    common_b = total(p.acc_b.common)
    assert (common_b.num_drafts, common_b.accepted_tokens) == (3 + 1, 1)
    plain_a = total(p.acc_a.plain)
    assert point_estimates([plain_a])["mean_acceptance_length"] == 1 + 6 / 4


def test_failed_requests_are_unpaired():
    a = [_row(0, [1, 2]), {**_row(1, [1]), "error": "HTTP 500"}]
    b = [_row(0, [1, 2]), _row(1, [1])]
    p = compare_outputs("A", a, "B", b)
    assert (p.n, p.unpaired) == (1, 1)


def test_committed_baseline_mla_on_vs_off_diverges_on_measured_prompts():
    """Real committed data (results/baselines/cpu-default): counted here independently, token by token."""
    base = ROOT / "results" / "baselines" / "cpu-default"
    rows = {
        c: [json.loads(x) for x in (base / c / "requests.jsonl").read_text().splitlines()]
        for c in ("mla-on__output_norm-on__r0", "mla-off__output_norm-on__r0")
    }
    on, off = rows["mla-on__output_norm-on__r0"], rows["mla-off__output_norm-on__r0"]
    p = compare_outputs("on", on, "off", off)
    expected_same = sum(1 for x, y in zip(on, off) if x["token_ids"] == y["token_ids"])
    assert p.n == len(on) == 20
    assert p.identical == expected_same
    assert p.identical < p.n  # measured on the fixture: MLA on/off changes greedy text
    for pp, x, y in zip(p.prompts, on, off):
        if pp.position is not None:
            assert x["token_ids"][: pp.position] == y["token_ids"][: pp.position]
            assert x["token_ids"][pp.position] != y["token_ids"][pp.position]
    # per-step arrays (detailed level): a common-prefix figure per request, never more steps than the whole output
    assert len(p.acc_a.common) == len(p.acc_b.common) == p.n and not p.acc_a.unaligned
    for side in (p.acc_a, p.acc_b):
        assert sum(c.num_drafts for c in side.common) < sum(c.num_drafts for c in side.plain)


# --- common-prefix estimator against known truth (simulation) ---------------------------------
# Per-step accepted counts i.i.d. from a known distribution (k = 3), identical in law before and
# after the divergence, so the truth on the common prefix is the distribution's own AL. Prefix
# lengths geometric with median ~6-7 tokens (as between the MLA on/off cells of a measured default-study run: median 7, range 0-32).
TRUE_A, P_A = 2.70, [0.25, 0.20, 0.15, 0.40]  # P(accepted = 0..3): AL = 1 + 0.2 + 0.3 + 1.2
TRUE_B, P_B = 2.90, [0.20, 0.15, 0.20, 0.45]
N_TOKENS = 64


def _sticky(rng, probs, n_req: int, stay: float) -> np.ndarray:
    """Dependent steps: each repeats the previous step's count with probability ``stay``, else draws
    afresh from ``probs``; started from ``probs``, every step's marginal law is ``probs`` (same AL)."""
    steps = rng.choice(4, size=(n_req, N_TOKENS), p=probs)
    keep = rng.random((n_req, N_TOKENS)) < stay
    for j in range(1, N_TOKENS):
        steps[:, j] = np.where(keep[:, j], steps[:, j - 1], steps[:, j])
    return steps


def _simulated_rows(n_req: int, seed: int, stay: float = 0.0) -> tuple[list[dict], list[dict]]:
    rng = np.random.default_rng(seed)
    prefix = np.minimum(rng.geometric(0.1, size=n_req) - 1, N_TOKENS - 1)
    sides = []
    for probs in (P_A, P_B):
        steps = _sticky(rng, probs, n_req, stay)
        rows = []
        for i in range(n_req):
            ends = 1 + np.cumsum(steps[i] + 1)  # token index after each step
            acc = steps[i][: int(np.searchsorted(ends, N_TOKENS)) + 1].tolist()  # last step may be clipped
            tokens = list(range(N_TOKENS))
            if probs is P_B:  # B's text leaves A's at the divergence
                tokens = tokens[: prefix[i]] + [t + 1000 for t in tokens[prefix[i] :]]
            rows.append(_row(i, tokens, _spec(acc)))
        sides.append(rows)
    return sides[0], sides[1]


def _old_end_inside_rule(spec: dict, n_tokens: int, prefix: int | None) -> tuple[int, int]:
    """The estimator this module used before: only steps whose emitted tokens all lie in the prefix."""
    pos = d = acc = 0
    pos = 1
    for a in spec["per_step_accepted"]:
        if prefix is not None and min(pos + a + 1, n_tokens) > prefix:
            break
        d, acc, pos = d + 1, acc + a, pos + a + 1
    return d, acc


@pytest.mark.heavy
def test_prefix_al_is_unbiased_with_independent_steps():
    a, b = _simulated_rows(3000, seed=7)
    pair = compare_outputs("A", a, "B", b)
    assert 5 <= float(np.median(pair.positions)) <= 8
    ci = common_prefix_intervals(pair, n_resamples=400, seed=0)
    assert (ci.prompts, ci.clusters) == (3000, 3000) and ci.drafts_a > 5000 and ci.drafts_b > 5000
    for est, (lo, hi), truth in (
        (ci.al_a, ci.ci_a, TRUE_A),
        (ci.al_b, ci.ci_b, TRUE_B),
        (ci.delta, ci.ci_delta, TRUE_B - TRUE_A),
    ):
        se = (hi - lo) / (2 * 1.96)  # Monte Carlo error of this estimate (bootstrap over prompts)
        assert 0 < se < 0.03
        assert abs(est - truth) < 3 * se, (est, truth, se)
    # the rule it replaced, on the same data, reads low by far more than its error (true 2.70 -> ~2.53)
    old = [_old_end_inside_rule(r["spec_decode"], N_TOKENS, p.position) for r, p in zip(a, pair.prompts)]
    old_al = 1 + sum(x for _, x in old) / sum(d for d, _ in old)
    assert old_al < TRUE_A - 0.1, old_al


@pytest.mark.heavy
def test_prefix_al_is_not_an_al_with_dependent_steps():
    """Sticky steps (each step's marginal law P_A / P_B, so AL 2.70 / 2.90): prefix AL departs from the
    same requests' plain AL by far more than its error, so it must not sit beside AL as the same
    quantity (the report keeps it in a table of its own). On identical outputs it is the plain AL."""
    a, b = _simulated_rows(3000, seed=11, stay=0.6)
    pair = compare_outputs("A", a, "B", b)
    plain = point_estimates([total(pair.acc_a.plain)])["mean_acceptance_length"]
    assert abs(plain - TRUE_A) < 0.05  # whole outputs: the chain's AL, up to the 64-token cut
    ci = common_prefix_intervals(pair, n_resamples=400, seed=0)
    se = (ci.ci_a[1] - ci.ci_a[0]) / (2 * 1.96)
    assert 0 < se < 0.03
    assert ci.al_a < plain - 3 * se, (ci.al_a, plain, se)  # measured: 2.60 against 2.68
    same = compare_outputs("A", a, "A2", a)
    assert same.identical == 3000
    assert point_estimates([total(same.acc_a.common)])["mean_acceptance_length"] == pytest.approx(plain)


def test_common_prefix_intervals_pair_and_cluster_by_prompt():
    # two requests of one prompt id (repeats) are one cluster; fewer than 2 clusters: no interval
    a = [_row(0, [1, 2, 3, 4], _spec([2]), prompt="p"), _row(1, [1, 2, 3, 4], _spec([0, 1]), prompt="p")]
    b = [_row(0, [1, 2, 3, 4], _spec([1, 0]), prompt="p"), _row(1, [1, 2, 3, 4], _spec([2]), prompt="p")]
    ci = common_prefix_intervals(compare_outputs("A", a, "B", b))
    assert (ci.prompts, ci.clusters, ci.drafts_a, ci.drafts_b) == (2, 1, 3, 3)
    assert ci.al_a == ci.al_b == 2.0 and ci.delta == 0.0 and all(np.isnan(ci.ci_delta))
    assert common_prefix_intervals(compare_outputs("A", [_row(0, [1, 2])], "B", [_row(0, [1, 2])])) is None
    # against a cell without speculation (a baseline): A's side alone, no difference
    one = common_prefix_intervals(compare_outputs("A", a, "B", [_row(0, [1, 2, 3, 4], prompt="p")]))
    assert (one.prompts, one.drafts_a, one.drafts_b, one.al_a) == (0, 1, 0, 3.0)
    assert np.isnan(one.al_b) and np.isnan(one.delta)

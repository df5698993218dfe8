"""specbench/analysis/divergence.py on hand-made outputs and per-step arrays, checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.analysis.acceptance import point_estimates
from specbench.analysis.divergence import compare_outputs, first_divergence, step_counts

ROOT = Path(__file__).resolve().parents[2]


def _spec(acc: list[int], k: int = 3) -> dict:
    per_pos = [sum(1 for a in acc if a > i) for i in range(k)]
    return {"num_spec_tokens": k, "num_drafts": len(acc), "draft_tokens": k * len(acc),
            "accepted_tokens": sum(acc), "accepted_per_position": per_pos,
            "per_step_accepted": acc, "per_step_drafted": [k] * len(acc)}


def _row(i: int, tokens: list[int], spec: dict | None = None, prompt: str | None = None) -> dict:
    return {"id": i, "prompt_id": prompt or f"p{i}", "token_ids": tokens, "text": "", "error": None,
            "spec_decode": spec}


def test_first_divergence_cases():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([5], [6]) == 0
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # strict prefix: diverges where the shorter stops
    assert first_divergence("abc", "abd") == 2


def test_step_counts_keep_only_steps_inside_the_prefix():
    # token 0 from prefill; steps emit 1+a tokens: [1,2] [3] [4,5,6,7] [8,9] -> ends 3, 4, 8, 10
    spec = _spec([1, 0, 3, 1])
    n = 10
    whole = step_counts(spec, n, None)
    assert (whole.num_drafts, whole.accepted_tokens, whole.accepted_per_position) == (4, 5, [3, 1, 1])
    # diverging at position 5 keeps the steps ending at 3 and 4 (tokens 1..3), not the one ending at 8
    pre = step_counts(spec, n, 5)
    assert (pre.num_drafts, pre.draft_tokens, pre.accepted_tokens, pre.accepted_per_position) == (2, 6, 1, [1, 0, 0])
    assert step_counts(spec, n, 4).num_drafts == 2  # a step ending exactly at the prefix counts
    assert step_counts(spec, n, 0).num_drafts == 0


def test_step_counts_clip_the_last_step_at_max_tokens_and_refuse_unaligned():
    spec = _spec([3, 3])  # 1 + 4 + 4 = 9 tokens if not cut; cut at 7 (2 clipped, <= k)
    assert step_counts(spec, 7, None).num_drafts == 2
    assert step_counts(spec, 7, 7).num_drafts == 2  # the clipped step's emitted tokens are all inside
    assert step_counts(spec, 7, 6).num_drafts == 1
    assert step_counts(spec, 12, None) is None  # steps account for 9 tokens, not 12
    assert step_counts({**spec, "per_step_accepted": None}, 7, None) is None  # summary level


def test_pairs_identical_diverging_and_mismatched_prompts():
    a = [_row(0, [1, 2, 3, 4, 5], _spec([1, 2])), _row(1, [1, 2, 3, 4, 5], _spec([3, 0])),
         _row(2, [7, 7], _spec([0])), _row(3, [1, 1], None)]
    b = [_row(0, [1, 2, 3, 4, 5], _spec([0, 0, 1])), _row(1, [1, 2, 9, 9, 9], _spec([0, 1, 0])),
         _row(2, [7, 7], _spec([0]), prompt="other"), _row(3, [1, 1], None)]
    p = compare_outputs("A", a, "B", b)
    assert (p.n, p.identical, p.mismatched, p.positions) == (3, 2, 1, [2])
    assert abs(p.identical_share - 2 / 3) < 1e-12
    # A's common prefix: request 0 whole (identical), request 1 (diverges at 2): step 1 emits tokens
    # 1..4, past the prefix -> no step; request 3 has no speculation
    common_a = sum(p.acc_a.common)
    assert (common_a.num_drafts, common_a.accepted_tokens) == (2, 3)
    # B's request 1: steps [0, 1, 0] end at 2, 4, 5 -> only the first lies inside [0, 2)
    common_b = sum(p.acc_b.common)
    assert (common_b.num_drafts, common_b.accepted_tokens) == (3 + 1, 1)
    plain_a = sum(p.acc_a.plain)
    assert point_estimates([plain_a])["mean_acceptance_length"] == 1 + 6 / 4


def test_failed_requests_are_unpaired():
    a = [_row(0, [1, 2]), {**_row(1, [1]), "error": "HTTP 500"}]
    b = [_row(0, [1, 2]), _row(1, [1])]
    p = compare_outputs("A", a, "B", b)
    assert (p.n, p.unpaired) == (1, 1)


def test_committed_baseline_mla_on_vs_off_diverges_on_measured_prompts():
    """Real committed data (results/baselines/cpu-default): counted here independently, token by token."""
    base = ROOT / "results" / "baselines" / "cpu-default"
    rows = {c: [json.loads(x) for x in (base / c / "requests.jsonl").read_text().splitlines()]
            for c in ("mla-on__output_norm-on__r0", "mla-off__output_norm-on__r0")}
    on, off = rows["mla-on__output_norm-on__r0"], rows["mla-off__output_norm-on__r0"]
    p = compare_outputs("on", on, "off", off)
    expected_same = sum(1 for x, y in zip(on, off) if x["token_ids"] == y["token_ids"])
    assert p.n == len(on) == 20
    assert p.identical == expected_same
    assert p.identical < p.n  # measured on the fixture: MLA on/off changes greedy text
    for pp, x, y in zip(p.prompts, on, off):
        if pp.position is not None:
            assert x["token_ids"][:pp.position] == y["token_ids"][:pp.position]
            assert x["token_ids"][pp.position] != y["token_ids"][pp.position]
    assert p.acc_a.common == []  # summary-level data: no per-step arrays, no common-prefix figure

"""No float decides (issue 37, item 4): changes and bounds within rounding are 0, and whether every
unit shows the same change is read off the counts exactly. Copies of the committed CPU baseline."""

from __future__ import annotations

import json

import pytest
from realruns import SPEC_CELLS, run
from rewrite import first_prompts

CELL = SPEC_CELLS[0]


def _one_more_draft(_: int, sd: dict) -> dict:
    """One more draft, nothing more accepted: p_i move, alpha_i = a_i / a_(i-1) stay, prompt by prompt."""
    return {
        **sd,
        "num_drafts": sd["num_drafts"] + 1,
        "draft_tokens": sd["draft_tokens"] + 3,
        "acceptance_histogram": None,
    }


@pytest.mark.heavy
@pytest.mark.parametrize("prompts", [3, 20])
def test_alpha_identical_prompt_by_prompt_never_fails_from_rounding(tmp_path, prompts):
    """Was: conditional[1]:0 failed at 3 prompts, "worse by 1.11e-16, CI of harm [1.11e-16, 1.11e-16]"."""
    base = first_prompts(tmp_path / "b", prompts)
    cand = first_prompts(tmp_path / "c", prompts, SPEC_CELLS, _one_more_draft)
    js = tmp_path / "r.json"
    code, out = run(base, cand, "--gate", "conditional[*]:0", "--json", js)
    assert code == 3 and "0 failed" in out and "e-16" not in out, out
    data = json.loads(js.read_text())
    for cell in data["cells"]:
        rows = {m["name"]: m for m in cell["metrics"]}
        for i in (1, 2):
            row = rows.get(f"conditional[{i}]")
            if row is None or row["base"] is None:
                continue
            assert row["delta"] == 0.0 and row["verdict"] == "~"
            assert row["ci"] is None or row["ci"][0] == -row["ci"][1]  # centred on an exact 0
    # a zero tolerance: an interval with a width around an exact 0 straddles it (inconclusive), never a fail
    code, out = run(base, cand, "--gate", "conditional[1]:0", "--json", js, "--allow-inconclusive")
    assert code in (0, 3) and "0 failed" in out, out
    if prompts == 20:
        (al1,) = [g for c in json.loads(js.read_text())["cells"] if c["base_ids"] == [CELL] for g in c["gates"]]
        assert al1["status"] == "inconclusive" and al1["undecided"], al1


def _same_drop(i: int, sd: dict) -> dict:
    """40 drafts a prompt, 10 fewer accepted at every position of every prompt."""
    acc = [30 - 5 * (i % 3) - 5 * j - 10 for j in range(3)]
    return {**sd, "num_drafts": 40, "draft_tokens": 120, "accepted_tokens": sum(acc), "accepted_per_position": acc}


def _same_counts(i: int, sd: dict) -> dict:
    acc = [30 - 5 * (i % 3) - 5 * j for j in range(3)]
    return {**sd, "num_drafts": 40, "draft_tokens": 120, "accepted_tokens": sum(acc), "accepted_per_position": acc}


def test_the_same_change_on_every_prompt_gets_one_verdict_across_the_cells_metrics(tmp_path):
    """Every prompt drops 10 of its 40 drafts' tokens at every position: every statistic's
    leave-one-out change is the same, exactly. Was: p_0 "inconclusive: zero-width" while AL, p_1 and
    p_2 of the same cell failed, by whether the jackknife variance came out 0 or 1e-33."""
    base = first_prompts(tmp_path / "b", 6, [CELL], _same_counts)
    cand = first_prompts(tmp_path / "c", 6, [CELL], _same_drop)
    js = tmp_path / "r.json"
    gates = ["--gate", "acceptance_length:0", "--gate", "draft_acceptance_rate:0", "--gate", "per_position[*]:0"]
    run(base, cand, *gates, "--json", js)
    (cell,) = [c for c in json.loads(js.read_text())["cells"] if c["base_ids"] == [CELL]]
    checks = {g["metric"]: g for g in cell["gates"]}
    assert len(checks) == 5
    assert {g["status"] for g in checks.values()} == {"inconclusive"}, {m: g["message"] for m, g in checks.items()}
    assert all("a zero-width interval never decides" in g["message"] for g in checks.values())

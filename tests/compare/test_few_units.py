"""Too few distinct units never decide (issue 29): loads of one or two prompts, zero-width
intervals, speed-up over one request. Copies of the committed CPU baseline, rewritten."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from realruns import BASELINE, SPEC_CELLS, run

from specbench.compare.gates import decide, parse_gate


def _few_prompt_load(dst: Path, n_prompts: int, lose_token: bool, prompt_ids: bool = True) -> Path:
    """Every speculative cell's 20 requests cycle through its first ``n_prompts`` prompts, each
    request of a prompt with that prompt's counts (greedy decoding repeats itself); with
    ``lose_token`` every request of the first prompt accepts one token fewer."""
    shutil.copytree(BASELINE, dst, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    for cid in SPEC_CELLS:
        f, a = dst / cid / "requests.jsonl", dst / cid / "acceptance.json"
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        orig = [json.loads(line) for line in f.read_text().splitlines()]
        acc = json.loads(a.read_text())
        units = []
        for i, r in enumerate(rows):
            src = orig[i % n_prompts]
            sd = json.loads(json.dumps(src["spec_decode"]))
            if lose_token and i % n_prompts == 0:
                j = max(j for j, x in enumerate(sd["accepted_per_position"]) if x > 0)
                sd["accepted_per_position"][j] -= 1
                sd["accepted_tokens"] -= 1
            r.update(spec_decode=sd, prompt_id=src["prompt_id"] if prompt_ids else None)
            units.append(
                {
                    **acc["per_request"]["units"][i % n_prompts],
                    "accepted_tokens": sd["accepted_tokens"],
                    "accepted_per_position": sd["accepted_per_position"],
                }
            )
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tot = {k: sum(u[k] for u in units) for k in ("num_drafts", "draft_tokens", "accepted_tokens")}
        tot["accepted_per_position"] = [sum(u["accepted_per_position"][i] for u in units) for i in range(3)]
        acc["per_request"]["units"] = units
        for src in ("per_request", "prometheus"):
            acc[src]["counts"].update(tot)
        a.write_text(json.dumps(acc))
    return dst


@pytest.mark.parametrize("n_prompts", [1, 2])
def test_loads_of_fewer_than_3_prompts_give_no_verdict(tmp_path, n_prompts):
    """One lost token in the repeats of one prompt: at 1 prompt this failed every cell (zero-width
    CIs over 20 copies of one request); at 2 prompts a t interval with df 1 decided."""
    base = _few_prompt_load(tmp_path / "b", n_prompts, lose_token=False)
    cand = _few_prompt_load(tmp_path / "c", n_prompts, lose_token=True)
    code, out = run(base, cand, "--gate", "acceptance_length:0", "--gate", "per_position[*]:-2pp")
    assert code == 3, out
    assert "0 passed, 0 failed, 24 inconclusive" in out
    assert f"too few independent prompts: {n_prompts} paired; a verdict needs >= 3 distinct prompts per side" in out


@pytest.mark.heavy
def test_a_zero_width_interval_around_a_change_never_decides(tmp_path):
    """Requests without prompt ids (the units of acceptance.json): 20 copies of one request per
    side, one token fewer in every candidate copy. Both sides' units are all alike: the interval has
    zero width around the change, and was a FAIL in every cell."""
    base = _few_prompt_load(tmp_path / "b", 1, lose_token=False, prompt_ids=False)
    cand = _few_prompt_load(tmp_path / "c", 1, lose_token=True, prompt_ids=False)
    code, out = run(base, cand, "--gate", "acceptance_length:0")
    assert code == 3, out
    assert "a zero-width interval never decides" in out and "0 failed" in out
    # no change at all (every unit identical on both sides) is no failure, nor a zero-width verdict;
    # a zero tolerance: an interval with a width straddles it, so a pass needs the whole interval at or
    # below no harm (power.py)
    same = _few_prompt_load(tmp_path / "c2", 1, lose_token=False, prompt_ids=False)
    code, out = run(base, same, "--gate", "acceptance_length:0")
    assert code == 3 and "not known to be within acceptance_length:0" in out and "zero-width" not in out, out
    assert run(base, same, "--gate", "acceptance_length:0", "--allow-inconclusive")[0] == 0


def test_speedup_over_one_request_never_decides(tmp_path):
    """One request per cell: the speed-up's bootstrap had zero width, and a 6% jitter failed; the
    jackknife t interval needs two requests a side."""
    base, cand = tmp_path / "b", tmp_path / "c"
    for run_dir, factor in ((base, 1.0), (cand, 1.06)):
        shutil.copytree(BASELINE, run_dir, ignore=shutil.ignore_patterns("server.log", "*.prom"))
        for cell in (p for p in run_dir.iterdir() if (p / "cell.json").is_file()):
            f = cell / "requests.jsonl"
            row = json.loads(f.read_text().splitlines()[0])
            if not cell.name.startswith("baseline"):
                row["e2e_s"] *= factor
            f.write_text(json.dumps(row) + "\n")
    code, out = run(base, cand, "--gate", "speedup:-5%")
    assert code == 3, out
    assert "0 passed, 0 failed, 6 inconclusive" in out
    assert "too few requests for an interval (1 vs 1; needs >= 2 per side)" in out


def test_decide_zero_width():
    gate = parse_gate("acceptance_length:0")
    assert decide(gate, 2.5, 2.49, (-0.01, -0.01), se=0.0, df=19).status == "inconclusive"
    assert decide(gate, 2.5, 2.5, (0.0, 0.0), se=0.0, df=19).status == "pass"

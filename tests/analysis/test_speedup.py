"""specbench/analysis/speedup.py: hand-made timings with known speed-ups, and the committed CPU baseline."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from specbench.analysis.intervals import t_quantile
from specbench.analysis.speedup import RERUN_SD, request_matrix
from specbench.analysis.speedup import speedup as _speedup
from specbench.compare.within_run import speedup_delta
from specbench.records.requests import requests_of

ROOT = Path(__file__).resolve().parents[2]


def speedup(cell, spec_rows, baseline, base_rows, **kw):
    """analysis.speedup.speedup on hand-made rows, validated once into records as a run's reader does."""
    return _speedup(cell, requests_of(spec_rows), baseline, requests_of(base_rows), **kw)


def _req(i: int, out: int, ttft: float, e2e: float, drafts: int | None = None, accepted: int | None = None) -> dict:
    sd = None if drafts is None else {"num_drafts": drafts, "accepted_tokens": accepted}
    return {
        "id": i,
        "prompt_id": f"p{i}",
        "output_tokens": out,
        "ttft_s": ttft,
        "e2e_s": e2e,
        "error": None,
        "spec_decode": sd,
    }


def test_known_speedups_by_hand():
    # baseline: 11 tokens, 0.1 s to first, 1.0 s decode -> 0.1 s per token
    base = [_req(i, 11, 0.1, 1.1) for i in range(4)]
    # spec: 11 tokens in 4 verify steps (AL = 1 + 6/4 = 2.5), decode 0.5 s -> t_verify 0.125 s
    spec = [_req(i, 11, 0.1, 0.6, drafts=4, accepted=6) for i in range(4)]
    s = speedup("spec", spec, "base", base)
    assert s.paired
    assert s.point["output_tok_per_s"] == pytest.approx((11 / 0.6) / (11 / 1.1))
    assert s.point["tpot"] == pytest.approx(0.1 / 0.05)
    assert s.point["e2e"] == pytest.approx(1.1 / 0.6)
    assert s.point["decomposition"] == pytest.approx(2.5 * 0.1 / 0.125)
    assert s.point["cost_ratio"] == pytest.approx(1.25)
    # every request identical: nothing moves inside the run, and the interval is the between-run
    # spread alone, t with df n - 1 on the log
    h = t_quantile(0.95, 3) * RERUN_SD
    for k in ("output_tok_per_s", "tpot", "e2e", "decomposition"):
        assert s.within[k] == pytest.approx((s.point[k], s.point[k]))
        assert s.intervals[k] == pytest.approx((s.point[k] * math.exp(-h), s.point[k] * math.exp(h)))


def test_intervals_cover_the_point_and_unpaired_sets_resample_separately():
    rng = np.random.default_rng(1)
    base = [_req(i, 32, 0.05, 0.05 + 31 * rng.uniform(0.008, 0.012)) for i in range(30)]
    spec = [_req(i + 100, 32, 0.05, 0.05 + 12 * rng.uniform(0.015, 0.02), drafts=12, accepted=19) for i in range(25)]
    s = speedup("spec", spec, "base", base)
    assert not s.paired
    for k in ("output_tok_per_s", "tpot", "e2e", "decomposition"):
        lo, hi = s.intervals[k]
        assert lo < s.point[k] < hi
    assert s.point["tpot"] > 1


def test_failed_and_one_token_requests_are_left_out():
    rows = [_req(0, 5, 0.1, 0.5), {**_req(1, 5, 0.1, 0.5), "error": "x"}, _req(2, 1, 0.1, 0.1)]
    keys, m = request_matrix(rows)
    assert keys == [(None, 0, "p0")] and m.shape == (1, 6)


def test_committed_baseline_speedup_from_its_own_timings():
    """Real committed data: speed-up recomputed here from requests.jsonl with plain Python."""
    base_dir = ROOT / "results" / "baselines" / "cpu-default"
    read = lambda c: [json.loads(x) for x in (base_dir / c / "requests.jsonl").read_text().splitlines()]  # noqa: E731
    base, spec = read("baseline__mla-on__r0"), read("mla-on__output_norm-on__r0")
    s = speedup("spec", spec, "base", base)
    tok = lambda rows: sum(r["output_tokens"] for r in rows) / sum(r["e2e_s"] for r in rows)  # noqa: E731
    tpot = lambda rows: (  # noqa: E731
        sum(r["e2e_s"] - r["ttft_s"] for r in rows) / sum(r["output_tokens"] - 1 for r in rows)
    )
    assert s.point["output_tok_per_s"] == pytest.approx(tok(spec) / tok(base))
    assert s.point["tpot"] == pytest.approx(tpot(base) / tpot(spec))
    d = sum(r["spec_decode"]["num_drafts"] for r in spec)
    al = 1 + sum(r["spec_decode"]["accepted_tokens"] for r in spec) / d
    t_verify = sum(r["e2e_s"] - r["ttft_s"] for r in spec) / d
    assert s.point["decomposition"] == pytest.approx(al * tpot(base) / t_verify)
    assert s.paired and s.n_spec == s.n_base == 20


def test_rows_without_prompt_ids_are_not_paired():
    # llmperf rows: ids 0..n in both cells but no prompt_id (each run samples its own prompts)
    base = [{**_req(i, 11, 0.1, 1.1), "prompt_id": None} for i in range(4)]
    spec = [{**_req(i, 11, 0.1, 0.6, drafts=4, accepted=6), "prompt_id": None} for i in range(4)]
    assert not speedup("spec", spec, "base", base).paired
    named = speedup(
        "spec", [_req(i, 11, 0.1, 0.6, 4, 6) for i in range(4)], "base", [_req(i, 11, 0.1, 1.1) for i in range(4)]
    )
    assert named.paired


def _plain_jackknife_se(spec: list[dict], base: list[dict]) -> float:
    """The paired jackknife SE of log(tok/s speed-up), by leaving each prompt out of both lists."""
    tok = lambda rows: sum(r["output_tokens"] for r in rows) / sum(r["e2e_s"] for r in rows)  # noqa: E731
    loo = [math.log(tok(spec[:i] + spec[i + 1 :]) / tok(base[:i] + base[i + 1 :])) for i in range(len(spec))]
    mean = sum(loo) / len(loo)
    return math.sqrt((len(loo) - 1) / len(loo) * sum((x - mean) ** 2 for x in loo))


def test_one_interval_method_for_report_and_gate():
    """The report's within-run interval is the t interval compare gates on (same SE, same df), here
    checked against a jackknife written out by hand on the committed run; the shown interval adds
    the between-run spread, rerun_sd=0 leaves the within-run one."""
    base_dir = ROOT / "results" / "baselines" / "cpu-default"
    read = lambda c: [json.loads(x) for x in (base_dir / c / "requests.jsonl").read_text().splitlines()]  # noqa: E731
    base, spec = read("baseline__mla-off__r0"), read("mla-off__output_norm-on__r0")
    s = speedup("spec", spec, "base", base)
    se = _plain_jackknife_se(spec, base)
    h = t_quantile(0.95, len(spec) - 1)
    p = s.point["output_tok_per_s"]
    assert s.within["output_tok_per_s"] == pytest.approx((p * math.exp(-h * se), p * math.exp(h * se)))
    wide = h * math.hypot(se, RERUN_SD)
    assert s.intervals["output_tok_per_s"] == pytest.approx((p * math.exp(-wide), p * math.exp(wide)))
    assert speedup("spec", spec, "base", base, rerun_sd=0).intervals == s.within
    # the gate: the change of a speed-up against itself has the within-run SE of both sides
    _, _, delta = speedup_delta(spec, base, spec, base)
    assert delta.se == pytest.approx(math.sqrt(2) * p * se)


def test_an_interleaved_cell_is_jackknifed_over_its_blocks_by_hand():
    """load.interleave tags every request of both sides with its block: the interval's unit is the
    block pair (the machine's state is shared inside a block), recomputed here with plain Python."""
    rng = np.random.default_rng(7)
    spec, base = [], []
    for i in range(20):
        slow = 1.0 + 0.5 * (i // 4 == 2)  # block 2 ran on a busy machine: both sides slower
        spec.append({**_req(i, 33, 0.1, slow * float(rng.uniform(0.5, 0.7))), "block": i // 4})
        base.append({**_req(i, 33, 0.1, slow * float(rng.uniform(0.2, 0.3))), "block": i // 4})
    s = speedup("spec", spec, "base", base, rerun_sd=0.0)
    sums = {
        b: [sum(r[k] for r in rows if r["block"] == b) for rows in (spec, base) for k in ("output_tokens", "e2e_s")]
        for b in range(5)
    }
    total = [sum(v[j] for v in sums.values()) for j in range(4)]

    def log_ratio(t):
        return math.log((t[0] / t[1]) / (t[2] / t[3]))

    loo = [log_ratio([total[j] - sums[b][j] for j in range(4)]) for b in range(5)]
    mean = sum(loo) / 5
    se = math.sqrt(4 / 5 * sum((x - mean) ** 2 for x in loo))
    h = t_quantile(0.95, 4) * se
    lo, hi = s.within["output_tok_per_s"]
    assert s.df == 4 and s.n_spec == 20
    assert math.isclose(math.log(lo), log_ratio(total) - h, rel_tol=1e-9)
    assert math.isclose(math.log(hi), log_ratio(total) + h, rel_tol=1e-9)
    # the same rows without their blocks: a request-level interval (df 19), the same point
    plain = speedup(
        "spec", [{**r, "block": None} for r in spec], "base", [{**r, "block": None} for r in base], rerun_sd=0.0
    )
    assert plain.df == 19 and plain.point["output_tok_per_s"] == s.point["output_tok_per_s"]
    # compare's gate computes the same within-run SE
    b, c, d = speedup_delta(spec, base, spec, base)
    assert d.df == 4


def test_a_request_or_block_lost_on_one_side_leaves_the_others_paired():
    """Interleaved: only requests both sides finished count, so one lost request (or a whole lost
    block) does not unpair the remaining block pairs nor sum different prompts on the two sides."""
    spec = [{**_req(i, 33, 0.1, 0.6 + 0.01 * i), "block": i // 4} for i in range(20)]
    base = [{**_req(i, 33, 0.1, 0.3 + 0.01 * i), "block": i // 4} for i in range(20)]
    full = speedup("spec", spec, "base", base, rerun_sd=0.0)
    one = speedup("spec", spec, "base", [{**r, "error": "x"} if r["id"] == 5 else r for r in base], rerun_sd=0.0)
    assert one.paired and one.df == 4 and one.n_spec == one.n_base == 19
    assert any("1 request(s) finished on one side only" in n for n in one.notes)
    kept = [r for r in spec if r["id"] != 5]
    want = sum(r["output_tokens"] for r in kept) / sum(r["e2e_s"] for r in kept)
    want /= sum(r["output_tokens"] for r in base if r["id"] != 5) / sum(r["e2e_s"] for r in base if r["id"] != 5)
    assert one.point["output_tok_per_s"] == pytest.approx(want, rel=1e-12)
    block = speedup("spec", spec, "base", [r for r in base if r["block"] != 2], rerun_sd=0.0)
    assert block.paired and block.df == 3 and full.df == 4

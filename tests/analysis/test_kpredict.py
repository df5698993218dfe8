"""specbench/analysis/kpredict.py: predictions at k' <= k, on hand-made requests with known answers
and on the committed vLLM-CPU k sweep (results/baselines/cpu-k-sweep: k = 1, 2, 3 + baseline, 40
requests each, per-step arrays), recomputed here in plain Python. No server is started."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from specbench.analysis.kpredict import predict_k

ROOT = Path(__file__).resolve().parents[2]
KSWEEP = ROOT / "results" / "baselines" / "cpu-k-sweep"


def _req(i: int, out: int, decode: float, drafts: int | None = None, per_pos: list[int] | None = None) -> dict:
    sd = None if drafts is None else {"num_spec_tokens": len(per_pos), "num_drafts": drafts,
                                      "accepted_tokens": sum(per_pos), "accepted_per_position": per_pos}
    return {"id": i, "prompt_id": f"p{i}", "output_tokens": out, "ttft_s": 0.1, "e2e_s": 0.1 + decode,
            "error": None, "spec_decode": sd}


# baseline: 11 tokens, 1.0 s of decode -> t_plain = 0.1 s per token
BASE = [_req(i, 11, 1.0) for i in range(4)]
# source at k = 3: 10 steps, accepted per position 8, 6, 4 -> p = 0.8, 0.6, 0.4, AL 2.8;
# 2.2 s of decode over 10 steps -> t_verify 0.22 s, c(3) = 2.2 plain steps
SOURCE = [_req(i, 29, 2.2, drafts=10, per_pos=[8, 6, 4]) for i in range(4)]


def test_known_predictions_by_hand():
    kp = predict_k("k3", SOURCE, 3, "base", BASE, n_resamples=100)
    assert [p.k for p in kp.points] == [1, 2, 3] and kp.paired
    assert [p.al_pred for p in kp.points] == pytest.approx([1.8, 2.4, 2.8])
    # cost model: 1 + (2.2 - 1) * k'/3
    assert [p.cost_model for p in kp.points] == pytest.approx([1.4, 1.8, 2.2])
    assert [p.speedup_pred for p in kp.points] == pytest.approx([1.8 / 1.4, 2.4 / 1.8, 2.8 / 2.2])
    assert kp.best_k == 2
    assert all(p.cell is None and p.al_inside is None for p in kp.points)


def test_measured_cell_at_k_prime_supplies_its_step_cost_and_the_check():
    # a k = 1 cell: 10 steps of 1.0 s in all -> cost 1.0 plain step; AL measured 1 + 7/10 = 1.7
    k1 = [_req(i, 18, 1.0, drafts=10, per_pos=[7]) for i in range(4)]
    kp = predict_k("k3", SOURCE, 3, "base", BASE, {1: ("k1", k1)}, n_resamples=100)
    p1 = kp.points[0]
    assert (p1.cell, p1.al_meas, p1.cost_meas) == ("k1", pytest.approx(1.7), pytest.approx(1.0))
    assert p1.speedup_pred_meas_cost == pytest.approx(1.8 / 1.0)
    # measured TPOT speed-up: t_plain 0.1 / (1.0 s / 17 tokens)
    assert p1.tpot_speedup_meas == pytest.approx(0.1 / (1.0 / 17))
    assert p1.al_inside is False  # identical requests: the CI is the point, 1.8 is outside {1.7}
    assert kp.best_k == 1  # with the measured cost k' = 1 predicts 1.8x, above k' = 2's 1.33x


def test_all_below_one_recommends_no_speculation_and_missing_positions_refuse():
    slow = [_req(i, 29, 9.0, drafts=10, per_pos=[8, 6, 4]) for i in range(4)]
    assert predict_k("k3", slow, 3, "base", BASE, n_resamples=50).best_k is None
    no_pos = [{**r, "spec_decode": {**r["spec_decode"], "accepted_per_position": None}} for r in SOURCE]
    with pytest.raises(ValueError, match="accepted-per-position"):
        predict_k("k3", no_pos, 3, "base", BASE, n_resamples=50)


def _rows(cell: str) -> list[dict]:
    return [json.loads(x) for x in (KSWEEP / cell / "requests.jsonl").read_text().splitlines()]


def test_committed_k_sweep_predictions_recomputed_by_hand():
    """The report's kprediction.csv rows on the committed vLLM-CPU sweep, recomputed from requests.jsonl."""
    from specbench.report.kpredict import kprediction_records
    from specbench.report.study import analyse_run

    study = analyse_run(KSWEEP)  # the report's defaults (2000 resamples, seed 0), as in docs/studies/k-sweep.md
    csv = pd.DataFrame(kprediction_records(study.kpredictions, str(KSWEEP)))
    src = _rows("num_speculative_tokens-3__r0")
    d = sum(r["spec_decode"]["num_drafts"] for r in src)
    pos = [sum(r["spec_decode"]["accepted_per_position"][i] for r in src) for i in range(3)]
    base = _rows("baseline__r0")
    t_plain = sum(r["e2e_s"] - r["ttft_s"] for r in base) / sum(r["output_tokens"] - 1 for r in base)
    row = csv[(csv.source_cell == "num_speculative_tokens-3__r0")].set_index("k")
    for kk in (1, 2, 3):
        assert row.loc[kk, "al_pred"] == pytest.approx(1 + sum(pos[:kk]) / d)
    meas = {kk: _rows(f"num_speculative_tokens-{kk}__r0") for kk in (1, 2)}
    for kk, rows in meas.items():
        dk = sum(r["spec_decode"]["num_drafts"] for r in rows)
        cost = sum(r["e2e_s"] - r["ttft_s"] for r in rows) / dk / t_plain
        assert row.loc[kk, "measured_cell"] == f"num_speculative_tokens-{kk}__r0"
        assert row.loc[kk, "al_meas"] == pytest.approx(1 + sum(r["spec_decode"]["accepted_tokens"] for r in rows) / dk)
        assert row.loc[kk, "cost_meas"] == pytest.approx(cost)
        assert row.loc[kk, "speedup_pred_meas_cost"] == pytest.approx(row.loc[kk, "al_pred"] / cost)
        assert row.loc[kk, "al_meas_ci_low"] < row.loc[kk, "al_meas"] < row.loc[kk, "al_meas_ci_high"]
    assert pd.isna(row.loc[3, "measured_cell"])
    # what docs/studies/k-sweep.md says about this run: AL at k' = 2 inside the measured CI, at
    # k' = 1 just outside; speed-up with the measured step cost inside at both, the cost model's
    # not at k' = 1; every predicted speed-up below 1, so no k is recommended
    assert list(row.loc[[1, 2], "al_inside_ci"]) == [False, True]
    assert list(row.loc[[1, 2], "speedup_inside_ci"]) == [True, True]
    assert list(row.loc[[1, 2], "model_speedup_inside_ci"]) == [False, True]
    assert pd.isna(row.loc[1, "recommended_k"])


def test_a_k_is_recommended_only_when_its_speedup_interval_lies_above_one():
    from specbench.analysis.kpredict import KPoint, KPrediction
    from specbench.report.kpredict import recommendation

    def kp(ci: tuple[float, float]) -> KPrediction:
        pts = [KPoint(k=1, al_pred=1.8, al_pred_ci=(1.7, 1.9), cost_model=1.75, cost_model_ci=(1.7, 1.8),
                      speedup_pred=1.03, speedup_pred_ci=ci),
               KPoint(k=2, al_pred=2.3, al_pred_ci=(2.2, 2.4), cost_model=2.5, cost_model_ci=(2.4, 2.6),
                      speedup_pred=0.92, speedup_pred_ci=(0.9, 0.95))]
        return KPrediction(source="s", baseline="b", k=2, points=pts, paired=True, confidence=0.95)

    assert kp((1.01, 1.05)).best_k == 1 and recommendation(kp((1.01, 1.05))).startswith("s: k = 1")
    straddles = kp((0.97, 1.09))
    assert straddles.best.k == 1 and straddles.best_k is None  # a point estimate alone recommends nothing
    assert "no k clearly faster" in recommendation(straddles) and "linear cost model" in recommendation(straddles)

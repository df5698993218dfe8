"""The dynamic-K schedule (specbench/analysis/schedule.py, report/dynamic_k.py): the k known to beat
no speculation at each concurrency, as the exact JSON vLLM takes, checked with the installed vLLM's
own validator (vllm/v1/spec_decode/dynamic/utils.py, loaded from its file: no vLLM import)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from specbench.analysis.schedule import Point, derive, speculative_config
from specbench.testing import vllm_schedule_utils as installed_schedule_utils

ROOT = Path(__file__).resolve().parents[2]


def vllm_schedule_utils():
    mod = installed_schedule_utils()
    if mod is None:
        pytest.skip("no vLLM installed")
    return mod


def test_the_fastest_k_known_to_beat_no_speculation_per_concurrency():
    points = [
        Point(1, 1, 1.30, (1.10, 1.50)),
        Point(1, 3, 1.60, (1.20, 2.00)),  # fastest at 1, known > 1
        Point(4, 1, 1.15, (1.05, 1.25)),  # known > 1
        Point(4, 3, 1.40, (0.90, 2.20)),  # faster point, but its interval reaches below 1: not chosen
        Point(8, 1, 0.95, (0.85, 1.05)),
        Point(8, 3, 0.80, (0.60, 1.00)),
        Point(16, 1, 0.70, (0.60, 0.80)),
    ]
    s = derive(points)
    assert [(c.concurrency, c.k) for c in s.choices] == [(1, 3), (4, 1), (8, 0), (16, 0)]
    assert s.entries == [[1, 3, 3], [4, 7, 1], [8, 16, 0]]  # the two K = 0 ranges merge
    assert "best k=1: 0.95x" in s.choices[2].why
    cfg = speculative_config(s, "eagle", "org/head")
    assert cfg["num_speculative_tokens"] == 3 and cfg["num_speculative_tokens_per_batch_size"] == s.entries
    utils = vllm_schedule_utils()
    assert utils.validate_and_normalize_dynamic_sd_schedule(s.entries) == [tuple(e) for e in s.entries]
    # what vLLM's scheduler then runs at each batch size (max_num_seqs 16)
    lookup = utils.build_dynamic_sd_schedule_lookup(s.entries, 16, cfg["num_speculative_tokens"])
    assert lookup[1:] == [3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]


@pytest.mark.heavy
def test_a_study_crossing_concurrency_gets_a_schedule_json_vllm_accepts(tmp_path):
    """The committed synthetic-AL sweep (concurrency 1 and 4): its report writes schedule.json, one
    schedule per AL setting; K > 0 at a concurrency exactly where speedup.csv shows a cell whose
    interval lies above 1 (read independently from that CSV)."""
    from specbench.cli.main import run_cli

    run = ROOT / "results/baselines/cpu-calibration-speedup"
    if not run.is_dir():
        pytest.skip("no committed cpu-calibration-speedup run")
    out = tmp_path / "rep"
    assert run_cli(["report", str(run), "--out", str(out), "--no-plots"]) == 0
    data = json.loads((out / "schedule.json").read_text())
    rows = list(csv.DictReader((out / "speedup.csv").open()))
    utils = vllm_schedule_utils()
    assert data["schedules"]
    for s in data["schedules"]:
        utils.validate_and_normalize_dynamic_sd_schedule(s["num_speculative_tokens_per_batch_size"])
        al = s["axes"]["synthetic_acceptance_length"]
        for choice in s["choices"]:
            mine = [
                r
                for r in rows
                if f"synthetic_acceptance_length-{al}__concurrency-{choice['concurrency']}__" in r["cell"]
            ]
            beats = [r for r in mine if float(r["speedup_output_tok_per_s_ci_low"]) > 1]
            assert (choice["k"] > 0) == bool(beats), (al, choice)
        assert s["speculative_config"]["synthetic_acceptance_length"] == float(al)  # the setting it ran with
    assert "## Dynamic K: the schedule the speed-ups support" in (out / "summary.md").read_text()


def test_lookup_is_what_vllms_scheduler_expands_a_schedule_to():
    """specbench's lookup (it names the K a cell should have run with) against the installed
    vLLM's build_dynamic_sd_schedule_lookup, over random valid schedules with gaps, caps and tails."""
    import random

    from specbench.analysis.schedule import lookup

    utils = vllm_schedule_utils()
    rng = random.Random(0)
    for _ in range(300):
        entries, start = [], 1
        for _ in range(rng.randint(1, 4)):
            end = start + rng.randint(0, 6)
            entries.append([start, end, rng.randint(0, 6)])
            start = end + 1 + rng.choice([0, 0, rng.randint(1, 5)])  # now and then a gap
        max_batch, k = rng.randint(1, 30), rng.randint(1, 5)
        want = utils.build_dynamic_sd_schedule_lookup(entries, max_batch, k)
        assert lookup(entries, max_batch, k) == want, (entries, max_batch, k)


def test_step_k_attests_the_k_most_steps_ran_with():
    from specbench.analysis.schedule import plain_steps, step_k

    ran = step_k([[2, 2, 2, 3], [2, 2], []], expected=2)
    assert ran.steps == {2: 5, 3: 1} and ran.total == 6 and ran.requests == 3
    assert ran.status == "attested"
    assert "K=2: 83%, K=3: 17%" in ran.line() and "the schedule's K here: 2 (attested)" in ran.line()
    assert step_k([[3, 3, 2]], expected=2).status == "differs"
    # K = 0: the steps that did not speculate (vLLM lists only those that drafted) must be most
    off = step_k([[3, 3], []], expected=0, plain_steps=plain_steps(64, 2, 4) + plain_steps(64, 0, 0))
    assert off.steps == {0: 57 + 63, 3: 2} and off.status == "attested"
    assert step_k([[1, 1]], expected=0, plain_steps=1).status == "differs"
    assert step_k([], expected=2).status == "unchecked"  # vLLM reported no per-step counts
    assert step_k([[2]], expected=None).status == "unchecked"  # no schedule to check against

"""A precision-driven load against one real vLLM-CPU server (the tiny fixture; one server start).

The target is loose (AL +- 0.15, batches of 5 after 20, the floor) so the loop stops after a few batches:
the test checks it stops for the recorded reason, that the recorded half-width is the
per-cell interval's longer side recomputed from the cell's own files (acceptance.json's per-request units), and how
it compares with the percentile bootstrap ``specbench report`` prints for the cell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from specbench.analysis.intervals import SCORE_JACKKNIFE
from specbench.analysis.stop_rule import half_widths
from specbench.load.precision import AT_MAX_REQUESTS, REACHED
from specbench.records.counts import Counts

pytestmark = pytest.mark.vllm
TARGET = 0.15


@pytest.fixture(scope="module")
def precision_run(tmp_path_factory) -> Path:
    pytest.importorskip("vllm")
    tmp = tmp_path_factory.mktemp("precision-run")
    cfg = {
        "name": "precision",
        "serve": {
            "model": "fixture:target",
            "speculative": {"method": "eagle", "draft": "fixture:draft", "num_speculative_tokens": 3},
            "enforce_eager": True,
            "max_model_len": 512,
            "max_num_seqs": 4,
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
            "log_stats_interval_s": 1,
        },
        "load": {
            "until": {"ci_half_width": {"acceptance_length": TARGET}},
            "max_requests": 30,
            "batch": 5,
            "min_requests": 20,
            "concurrency": 4,
            "max_tokens": 64,
            "warmup_requests": 2,
        },
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(path), "--results-dir", str(tmp / "results"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return Path(r.stdout.strip().splitlines()[-1])


def test_stops_for_the_recorded_reason(precision_run):
    (cell_dir,) = [d for d in precision_run.iterdir() if (d / "cell.json").is_file()]
    prec = json.loads((cell_dir / "cell.json").read_text())["precision"]
    sent = sum(1 for _ in (cell_dir / "requests.jsonl").open())
    assert prec["requests_sent"] == sent == prec["looks"][-1]["requests"]
    hw = prec["half_widths"]["acceptance_length"]
    assert prec["reason"] in (REACHED, AT_MAX_REQUESTS)
    if prec["reason"] == REACHED:
        assert hw <= TARGET
        assert all(
            look["half_widths"]["acceptance_length"] is None or look["half_widths"]["acceptance_length"] > TARGET
            for look in prec["looks"][:-1]
        )
    else:
        assert sent == 30 and hw > TARGET
    assert prec["unit"] == "request" and prec["n_units"] == sent  # 30 requests < 109 prompts: none repeats


def test_recorded_half_width_matches_the_cell_files_and_the_report(precision_run):
    from specbench.report.assemble import build_report

    (cell_dir,) = [d for d in precision_run.iterdir() if (d / "cell.json").is_file()]
    prec = json.loads((cell_dir / "cell.json").read_text())["precision"]
    acc = json.loads((cell_dir / "acceptance.json").read_text())
    units = [Counts.from_dict(u) for u in acc["per_request"]["units"]]
    (hw,), _ = half_widths(units, ["mean_acceptance_length"])[0].values(), None
    assert prec["half_widths"]["acceptance_length"] == pytest.approx(hw, rel=1e-12)
    assert acc["agreement"]["per_request_vs_prometheus"] is True  # the units are the exact counts
    row = build_report([precision_run]).summary.iloc[0]
    # the report and acceptance.json print the interval the load stopped on (same units, same method)
    lo, hi = acc["ci"]["intervals"]["mean_acceptance_length"]
    assert (row["mean_acceptance_length_ci_low"], row["mean_acceptance_length_ci_high"]) == pytest.approx((lo, hi))
    point = row["mean_acceptance_length"]  # the score interval is asymmetric: the rule reads its longer side
    assert max(hi - point, point - lo) == pytest.approx(hw, rel=1e-9) and acc["ci"]["method"] == SCORE_JACKKNIFE
    csv = pd.read_csv(precision_run / "cells.csv")
    assert list(csv.load_stop) == [prec["reason"]] and list(csv.requests) == [prec["requests_sent"]]

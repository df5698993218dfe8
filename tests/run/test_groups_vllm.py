"""A load axis runs on ONE real vLLM server, and each cell's counts still agree exactly.

One `specbench run` of the tiny fixture (target + EAGLE head) with ``load:concurrency: [1, 2, 4]``
and no baseline: a single server (one start-up in its log, one pid in every cell.json), three
cells, and per cell the log windows in that cell's own slice of the log == the /metrics diff
(metrics_after.prom - metrics_before.prom) == the sum over its requests.jsonl, recomputed here
from the files, not read from acceptance.json's own verdict.

Set SPECBENCH_GROUPED_RUN_DIR to a finished run of the same study (e.g. one kept by
``benchmarks/load_axes_reuse.py --keep DIR``, baselines allowed) to check it instead of running one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specbench.analysis.acceptance import counts_from_records
from specbench.analysis.counts import total as sum_counts
from specbench.metrics.parse import parse_text
from specbench.run.collect import diff_counts, prometheus_counts, request_units

pytestmark = pytest.mark.vllm

CONC = [1, 2, 4]


@pytest.fixture(scope="module")
def grouped_run(tmp_path_factory):
    pytest.importorskip("vllm")
    import os

    if os.environ.get("SPECBENCH_GROUPED_RUN_DIR"):
        return Path(os.environ["SPECBENCH_GROUPED_RUN_DIR"])
    tmp = tmp_path_factory.mktemp("grouped")
    cfg = {
        "name": "conc",
        "serve": {
            "model": "fixture:target",
            "enforce_eager": True,
            "max_model_len": 512,
            "max_num_seqs": 4,
            "speculative": {"draft": "fixture:draft", "num_speculative_tokens": 3},
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
            "log_stats_interval_s": 1,
            "startup_timeout_s": 600,
        },
        "matrix": {"load:concurrency": CONC},
        "load": {"num_requests": 8, "max_tokens": 32, "warmup_requests": 2},
        "results_dir": str(tmp / "results"),
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(path), "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = (tmp / "results").iterdir()
    return run_dir


def _cells(run_dir: Path, baseline: bool = False) -> list[dict]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cells = [json.loads((run_dir / cid / "cell.json").read_text()) for cid in manifest["cells"]]
    return [c for c in cells if bool(c.get("is_baseline")) == baseline]


@pytest.mark.parametrize("baseline", [False, True], ids=["speculative", "baseline"])
def test_one_server_for_three_concurrencies(grouped_run, baseline):
    cells = _cells(grouped_run, baseline)
    if baseline and not cells:
        pytest.skip("this run has no baseline cells")
    assert [c["axes"]["load:concurrency"] for c in cells] == CONC
    assert [c["load"]["concurrency"] for c in cells] == CONC
    assert all(c["status"] == "done" for c in cells)
    assert len({c["pid"] for c in cells}) == 1  # one process served every cell
    server_dir = grouped_run / cells[0]["server_group"]["log"]
    groups = {c["server_group"]["id"] for c in _cells(grouped_run) + _cells(grouped_run, True)}
    assert sorted(p.name for p in (grouped_run / "servers").iterdir()) == sorted(groups)  # one dir per server
    log = server_dir.read_text()
    # vLLM prints this once per API server start-up
    assert log.count("Starting vLLM server on") == 1, [line for line in log.splitlines() if "Starting vLLM" in line]
    assert [c["timings"]["startup_s"] > 0 for c in cells] == [True, False, False]
    assert [c["prefix_cache_reset"] for c in cells] == ["first load", "done", "done"]
    if baseline:  # no speculation: no spec-decode counts in any cell's window
        assert all(
            json.loads((grouped_run / c["cell_id"] / "acceptance.json").read_text())["baseline_ok"] for c in cells
        )


def test_counts_agree_exactly_per_cell(grouped_run):

    cells = _cells(grouped_run)
    full = (grouped_run / cells[0]["server_group"]["log"]).read_text().splitlines(keepends=True)
    seen_drafts = []
    for c in cells:
        d = grouped_run / c["cell_id"]
        before = prometheus_counts((d / "metrics_before.prom").read_text())
        prom = diff_counts(prometheus_counts((d / "metrics_after.prom").read_text()), before)
        assert prom is not None and prom.num_drafts > 0
        # The cell's windows: the lines of the full log after its 'before' scrape, up to its slice's end.
        first, last = c["server_group"]["log_lines"]
        after = c["log_window_wait"]["after_line"]
        assert first - 1 <= after <= last
        windows, _ = counts_from_records(parse_text("".join(full[after:last])))
        reqs = [json.loads(line) for line in (d / "requests.jsonl").read_text().splitlines()]
        assert len(reqs) == 8
        per_request = sum_counts(request_units(reqs))
        for total in (sum_counts(windows), per_request):
            assert (total.num_drafts, total.draft_tokens, total.accepted_tokens, total.accepted_per_position) == (
                prom.num_drafts,
                prom.draft_tokens,
                prom.accepted_tokens,
                prom.accepted_per_position,
            ), c["cell_id"]
        acc = json.loads((d / "acceptance.json").read_text())
        assert acc["agreement"]["logs_vs_prometheus"] is True
        assert acc["agreement"]["per_request_vs_prometheus"] is True
        # the cell's own server.log slice holds the same windows
        own, _ = counts_from_records(parse_text((d / "server.log").read_text()))
        assert sum_counts(own).num_drafts >= prom.num_drafts
        seen_drafts.append(prom.num_drafts)
    # the /metrics diffs partition the server's counters: no window counted in two cells
    last = prometheus_counts((grouped_run / cells[-1]["cell_id"] / "metrics_after.prom").read_text())
    first_before = prometheus_counts((grouped_run / cells[0]["cell_id"] / "metrics_before.prom").read_text())
    assert sum(seen_drafts) == last.num_drafts - first_before.num_drafts


def test_a_group_whose_server_fails_fails_every_cell_with_the_reason(tmp_path):
    """vLLM's argument parser rejects the flag value: the server exits at once (cheap: nothing served)."""
    pytest.importorskip("vllm")
    import os

    cfg = {
        "name": "dead",
        "results_dir": str(tmp_path / "results"),
        "serve": {
            "model": "fixture:target",
            "enforce_eager": True,
            "extra_args": ["--max-num-seqs", "many"],
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
            "startup_timeout_s": 300,
        },
        "matrix": {"load:concurrency": [1, 2]},
        "load": {"num_requests": 2, "warmup_requests": 0},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(path), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(tmp_path), "NO_COLOR": "1"},
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    (run_dir,) = (tmp_path / "results").iterdir()
    cells = _cells(run_dir)
    assert [c["status"] for c in cells] == ["failed", "failed"]
    assert all(c["reason"].startswith("the group's server did not start") for c in cells), cells[1]["reason"]
    assert len(list((run_dir / "servers").iterdir())) == 1  # tried once, not once per cell

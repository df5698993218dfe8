"""A load axis runs on ONE real vLLM server, and each cell's counts still agree exactly.

One `specbench run` of the tiny fixture (target + EAGLE head) with ``load:concurrency: [1, 2, 4]``
and a baseline: a single server per side (one start-up in its log, one pid in every cell.json),
three cells each, and per speculative cell the log windows in that cell's own slice of the log ==
the /metrics diff (metrics_after.prom - metrics_before.prom) == the sum over its requests.jsonl,
recomputed here from the files, not read from acceptance.json's own verdict.

The study also sets ``load.interleave: 4`` (run/interleave.py): each speculative cell's 8 requests
alternate in two blocks with the same requests on the server of its baseline (the companion), one
for all three baseline cells (they differ only in load), which then serves the baseline cells
themselves: two servers in all. Checked against vLLM's own access log of that server and the
clients' clocks; the speed-up report reads is recomputed here from the two request files.

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
from specbench.analysis.rates import total as sum_counts
from specbench.metrics.parse import parse_text
from specbench.run.collect import diff_counts, prometheus_counts, request_units

pytestmark = pytest.mark.vllm

CONC = [1, 2, 4]
INTERLEAVE = 4


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
        "load": {"num_requests": 8, "max_tokens": 32, "warmup_requests": 2, "interleave": INTERLEAVE},
        "baseline": True,
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
    every = _cells(grouped_run) + _cells(grouped_run, True)
    groups = {c["server_group"]["id"] for c in every if not c["server_group"].get("companion")}
    assert sorted(p.name for p in (grouped_run / "servers").iterdir()) == sorted(groups)  # one dir per server
    log = server_dir.read_text()
    # vLLM prints this once per API server start-up
    assert log.count("Starting vLLM server on") == 1, [line for line in log.splitlines() if "Starting vLLM" in line]
    if baseline:  # on the interleave companion, started (and warmed up) for the speculative cells
        assert [c["server_group"].get("companion") for c in cells] == [True] * 3
        assert cells[0]["server_group"]["log"].startswith("companions/")
        assert [c["timings"]["startup_s"] or 0 for c in cells] == [0, 0, 0]
        assert [c["prefix_cache_reset"] for c in cells] == ["done"] * 3  # it served their prompts before
    else:
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


def _tok_s(rows: list[dict]) -> float:
    ok = [r for r in rows if not r.get("error")]
    return sum(r["output_tokens"] for r in ok) / sum(r["e2e_s"] for r in ok)


def test_interleaved_blocks_alternate_on_one_companion_and_the_speedup_is_theirs(grouped_run):
    from specbench.report.baseline_pairs import run_speedups

    spec, bases = _cells(grouped_run), {c["axes"]["load:concurrency"]: c for c in _cells(grouped_run, True)}
    (companion,) = (grouped_run / "companions").iterdir()  # one server for all three baselines
    log = (companion / "server.log").read_text()
    assert log.count("Starting vLLM server on") == 1 and "speculative_config=None" in log
    assert "SpecDecoding metrics" not in log
    # vLLM's own access log: the warmup, every request of every speculative cell once, then the
    # baseline cells' own loads (no second warm-up)
    assert log.count('"POST /v1/chat/completions HTTP/1.1" 200') == 2 + len(spec) * 8 + len(bases) * 8
    assert not list((grouped_run / "servers").glob("baseline*"))  # the baselines started no server
    found = {s.cell: s for s in run_speedups(grouped_run).speedups}
    for c in spec:
        d = grouped_run / c["cell_id"]
        info = c["paired_baseline"]
        assert info["cell"] == bases[c["axes"]["load:concurrency"]]["cell_id"]
        assert (info["block"], info["blocks"], info["order"], info["requests"], info["failed"]) == (4, 2, "AB BA", 8, 0)
        assert info["server_log"] == f"companions/{companion.name}/server.log"
        assert info["prefix_cache_reset"] == "done"  # each cell sends the same prompts to the companion again
        own = [json.loads(line) for line in (d / "requests.jsonl").read_text().splitlines()]
        paired = [json.loads(line) for line in (d / "paired_baseline" / "requests.jsonl").read_text().splitlines()]
        assert [(r["id"], r["prompt_id"]) for r in own] == [(r["id"], r["prompt_id"]) for r in paired]
        assert not any(r.get("spec_decode") for r in paired)  # the companion does not speculate
        assert [r["block"] for r in own] == [r["block"] for r in paired] == [r["id"] // INTERLEAVE for r in own]

        def span(rows, ids):
            return min(r["start_s"] for r in rows if r["id"] in ids), max(
                r["start_s"] + r["e2e_s"] for r in rows if r["id"] in ids
            )

        first, second = range(0, 4), range(4, 8)
        # A B | B A on one clock: cell, baseline, baseline, cell, each block done before the next starts
        seq = [span(own, first), span(paired, first), span(paired, second), span(own, second)]
        assert all(a[1] <= b[0] + 1e-3 for a, b in zip(seq, seq[1:])), seq
        s = found[c["cell_id"]]
        assert s.interleaved and s.paired and s.n_base == 8 and s.df == 1  # two block pairs: the interval's units
        assert abs(s.point["output_tok_per_s"] - _tok_s(own) / _tok_s(paired)) < 1e-9


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

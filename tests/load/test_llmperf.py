"""llmperf adapter (specbench/load/llmperf.py) on llmperf's real output files."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest

from specbench.errors import DependencyError, InputError, SpecbenchError
from specbench.load.driver import write_outputs
from specbench.load.llmperf import LlmperfSpec, read_llmperf_results, results_name, run_llmperf
from specbench.load.summary import llmperf_row, summarize_rows

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "llmperf"
NAMES = ["m_60_12", "meta-llama-Llama-3-1-8B-Instruct_100_30"]

pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason=f"llmperf samples not at {FIXTURES}")


@pytest.mark.parametrize("name", NAMES)
def test_reader_maps_individual_responses(name):
    result = read_llmperf_results(FIXTURES, name)
    raw = json.loads((FIXTURES / f"{name}_individual_responses.json").read_text())
    summary = json.loads((FIXTURES / f"{name}_summary.json").read_text())
    assert len(result.requests) == len(raw) == summary["results_num_requests_started"]
    for req, row in zip(result.requests, raw):
        assert req["e2e_s"] == row["end_to_end_latency_s"] and req["ttft_s"] == row["ttft_s"]
        assert req["output_tokens"] == row["number_output_tokens"]
        assert req["itl_s"] is None and req["spec_decode"] is None and req["error"] is None
    assert result.model == summary["model"]
    assert result.duration_s > max(r["e2e_s"] for r in result.requests)


@pytest.mark.parametrize("name", NAMES)
def test_our_summary_math_reproduces_llmperfs(name):
    """Every results_* key llmperf wrote, recomputed by our summary code from its per-request file."""
    result = read_llmperf_results(FIXTURES, name)
    ref = json.loads((FIXTURES / f"{name}_summary.json").read_text())
    ours = summarize_rows([llmperf_row(r) for r in result.requests], result.duration_s)
    ref_keys = {k for k in ref if k.startswith("results_")}
    assert ref_keys == set(ours)
    for key in ref_keys:
        want, got = ref[key], ours[key]
        if isinstance(want, str) and key != "results_error_code_frequency":
            want = float(want)  # llmperf writes some min/max as strings
        if isinstance(want, float) and math.isnan(want):
            assert got is None, key
        elif isinstance(want, (int, float)):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), key
        else:
            assert got == want, key


def test_results_name_matches_llmperfs_files():
    assert results_name("meta-llama/Llama-3.1-8B-Instruct", 100, 30) == NAMES[1]
    assert results_name("m", 60, 12) == NAMES[0]


def test_reader_errors(tmp_path):
    with pytest.raises(InputError, match="expected one llmperf"):
        read_llmperf_results(tmp_path)
    shutil.copy(FIXTURES / "m_60_12_summary.json", tmp_path)
    with pytest.raises(InputError, match="individual_responses.json: llmperf result file not found"):
        read_llmperf_results(tmp_path)


STANDIN = '''
"""Stands in for llmperf's token_benchmark_ray.py, which needs the Hugging Face hub (unreachable
here) for its tokenizer: checks the argv and env specbench passes, then writes llmperf's files."""
import json, os, shutil, sys
args = sys.argv[1:]
val = lambda flag: args[args.index(flag) + 1]
assert os.environ["OPENAI_API_BASE"] == "http://127.0.0.1:9/v1", os.environ["OPENAI_API_BASE"]
assert os.environ["OPENAI_API_KEY"]
assert json.loads(val("--additional-sampling-params")) == {"temperature": 0}
print("standin llmperf running", flush=True)
if val("--model") == "fail":
    sys.exit(5)
src = os.environ["STANDIN_SAMPLES"]
for suffix in ("_summary.json", "_individual_responses.json"):
    shutil.copy(os.path.join(src, "m_60_12" + suffix), os.path.join(val("--results-dir"), "m_60_12" + suffix))
'''


def test_subprocess_path_with_standin(tmp_path, monkeypatch):
    checkout = tmp_path / "llmperf"
    checkout.mkdir()
    (checkout / "token_benchmark_ray.py").write_text(STANDIN)
    monkeypatch.setenv("STANDIN_SAMPLES", str(FIXTURES))
    spec = LlmperfSpec(path=checkout, python=sys.executable, mean_input_tokens=60, mean_output_tokens=12)
    result = run_llmperf("http://127.0.0.1:9", "m", spec, tmp_path / "out")
    assert len(result.requests) == 3
    assert "standin llmperf running" in (tmp_path / "out" / "llmperf.log").read_text()
    write_outputs(result, tmp_path / "cell")
    written = json.loads((tmp_path / "cell" / "summary.json").read_text())
    ref = json.loads((FIXTURES / "m_60_12_summary.json").read_text())
    assert written["results_ttft_s_quantiles_p50"] == pytest.approx(ref["results_ttft_s_quantiles_p50"])
    with pytest.raises(SpecbenchError, match=r"(?s)llmperf exited with status 5.*standin llmperf running"):
        run_llmperf("http://127.0.0.1:9", "fail", spec, tmp_path / "out2")
    with pytest.raises(DependencyError, match="git clone https://github.com/ray-project/llmperf"):
        run_llmperf("http://127.0.0.1:9", "m", LlmperfSpec(path=tmp_path, python=sys.executable), tmp_path / "o")

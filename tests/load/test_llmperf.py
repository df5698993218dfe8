"""llmperf adapter (specbench/load/llmperf.py) on llmperf's real output files."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from specbench.errors import DependencyError, InputError, SpecbenchError
from specbench.load import llmperf as llmperf_mod
from specbench.load.driver import write_outputs
from specbench.load.llmperf import LlmperfArgs, read_llmperf_results, results_name, run_llmperf
from specbench.load.llmperf_account import server_counts
from specbench.load.summary import llmperf_row, summarize_rows

# Real llmperf output files (see data/llmperf/README.md), committed so these tests run in any
# checkout; SPECBENCH_LLMPERF_FIXTURES points at another folder of samples.
FIXTURES = Path(os.environ.get("SPECBENCH_LLMPERF_FIXTURES") or Path(__file__).resolve().parent / "data" / "llmperf")
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
"""Stands in for llmperf's token_benchmark_ray.py where the real one cannot run here (it needs the
Hugging Face hub for its tokenizer) or cannot fail on demand. Checks the argv and env specbench
passes, then does what real llmperf f1d6bed was measured doing (STANDIN_MODE):
ok: writes its result files; drop: a request answered 400 kills its thread before it is recorded
(the Ray worker's warning and the thread's ZeroDivisionError in the output), exit 0 with one row
fewer; allfail: every thread dies, then metrics_summary on no rows raises KeyError, no files;
hang: never ends (with a child in its process group, whose pid it prints); progress: tqdm's
\\r-redrawn bar."""
import json, os, shutil, signal, subprocess, sys, time
args = sys.argv[1:]
val = lambda flag: args[args.index(flag) + 1]
assert os.environ["OPENAI_API_BASE"] == "http://127.0.0.1:9/v1", os.environ["OPENAI_API_BASE"]
assert os.environ["OPENAI_API_KEY"]
# Ray's AF_UNIX socket paths live under TMPDIR (measured: a pytest tmp_path is too long for them).
assert os.environ["RAY_TMPDIR"] == os.environ["TMPDIR"] and len(os.environ["TMPDIR"]) < 32, os.environ["TMPDIR"]
assert json.loads(val("--additional-sampling-params")) == {"temperature": 0}
print("standin llmperf running", flush=True)
mode = os.environ.get("STANDIN_MODE", "ok")
if val("--model") == "fail":
    sys.exit(5)
fail_lines = ("(OpenAIChatCompletionsClient pid=4242) Warning Or Error: 400 Client Error: Bad Request for url: "
              "http://127.0.0.1:9/v1/chat/completions\\n(OpenAIChatCompletionsClient pid=4242) 400\\n"
              "Exception in thread Thread-2 (launch_request):\\nTraceback (most recent call last):\\n"
              "ZeroDivisionError: float division by zero")
def fail_request():
    """What llmperf's OpenAI client does with a 400 (the observer on PYTHONPATH prints the body)."""
    import requests
    r = requests.Response(); r.status_code = 400; r.url = "http://127.0.0.1:9/v1/chat/completions"
    r._content = b'{"object":"error","message":"This model maximum context length is 512 tokens."}'
    try:
        r.raise_for_status()
    except requests.HTTPError as e:
        print(f"Warning Or Error: {e}", flush=True)
if mode == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    def reap_then_die(signum, frame):
        # The group's SIGTERM reached the child too: reap it before dying of the signal, so it is
        # not left a zombie for init to reap (some inits take a second or more, which kill_tree
        # would wait out). A child that got no SIGTERM is still running when this process ends.
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    signal.signal(signal.SIGTERM, reap_then_die)
    print(f"standin child {child.pid}", flush=True)
    time.sleep(600)
if mode == "progress":
    for k in range(4):
        sys.stderr.write(f"\\r 25%|##  | {k}/3 [00:01<00:03,  1.00it/s]"); sys.stderr.flush(); time.sleep(0.05)
    time.sleep(0.2); print("Results for token benchmark", flush=True)
if mode == "allfail":
    fail_request()
    print(fail_lines)
    print("Traceback (most recent call last):\\nKeyError: 'error_code'", file=sys.stderr)
    sys.exit(1)
src, out = os.environ["STANDIN_SAMPLES"], val("--results-dir")
rows = json.load(open(os.path.join(src, "m_60_12_individual_responses.json")))
summary = json.load(open(os.path.join(src, "m_60_12_summary.json")))
if mode == "drop":
    fail_request()
    print(fail_lines)
    rows = rows[:2]
    summary["results_num_requests_started"] = summary["results_num_completed_requests"] = 2
json.dump(rows, open(os.path.join(out, "m_60_12_individual_responses.json"), "w"))
json.dump(summary, open(os.path.join(out, "m_60_12_summary.json"), "w"))
'''


def _prom(ok: int, bad: int, finished: int, gen: int) -> str:
    """/metrics text in vLLM 0.32's format, with the counters the reconciliation reads."""
    return (
        f'http_requests_total{{handler="/v1/chat/completions",method="POST",status="2xx"}} {ok}.0\n'
        f'http_requests_total{{handler="/v1/chat/completions",method="POST",status="4xx"}} {bad}.0\n'
        'http_requests_total{handler="/metrics",method="GET",status="2xx"} 99.0\n'
        f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {finished}.0\n'
        f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {gen}.0\n'
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0\n'
        'vllm:num_requests_running{engine="0",model_name="m"} 0.0\n'
    )


def _server(before: str, after: str):
    """The server's /metrics as the adapter scrapes it: ``before`` first, ``after`` from then on."""
    calls = []

    def scrape():
        calls.append(1)
        return before if len(calls) == 1 else after

    return scrape


UTILS_STANDIN = '''
"""Stands in for llmperf/utils.py, whose prompt builder's default argument loads llmperf's tokenizer
from the hub at import (unreachable here). STANDIN_TOKENIZER: ok, empty (what recent transformers
returns offline after its retries) or hang (the retries)."""
import os, time

class _Tok:
    def encode(self, text):
        return [] if os.environ.get("STANDIN_TOKENIZER") == "empty" else text.split()

if os.environ.get("STANDIN_TOKENIZER") == "hang":
    time.sleep(600)

def randomly_sample_sonnet_lines_prompt(prompt_tokens_mean=550, tokenizer=_Tok()):
    pass
'''


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    d = tmp_path / "llmperf"
    (d / "src" / "llmperf").mkdir(parents=True)
    (d / "token_benchmark_ray.py").write_text(STANDIN)
    (d / "src" / "llmperf" / "__init__.py").write_text("")
    (d / "src" / "llmperf" / "utils.py").write_text(UTILS_STANDIN)
    monkeypatch.setenv("STANDIN_SAMPLES", str(FIXTURES))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # as long as the real-vLLM tests' private one
    return d


# The hanging tokenizer is waited out whatever the limit, so 1 s is enough; the empty one ends on its
# own, so its limit is only an upper bound that a loaded machine's start-up never reaches.
@pytest.mark.heavy
@pytest.mark.parametrize(
    "mode,expected,limit_s", [("empty", "tokenizer is empty", 60), ("hang", "did not load within 1 s", 1)]
)
def test_offline_tokenizer_is_caught_before_the_load(tmp_path, checkout, monkeypatch, mode, expected, limit_s):
    monkeypatch.setenv("STANDIN_TOKENIZER", mode)
    with pytest.raises(DependencyError, match=f"{expected}.*HF_HUB_OFFLINE=1"):
        run_llmperf(
            "http://127.0.0.1:9", "m", _spec(checkout), tmp_path / "out", scrape=lambda: None, check_tokenizer_s=limit_s
        )
    assert not (tmp_path / "out" / "llmperf.log").exists()  # llmperf itself never started


def test_observer_prints_the_servers_message_llmperf_drops():
    """The sitecustomize put on llmperf's PYTHONPATH: an HTTP error's body reaches llmperf's output."""
    import subprocess

    code = (
        "import requests\nr = requests.Response(); r.status_code = 400; r.url = 'http://x/v1/chat/completions'\n"
        'r._content = b\'{"error": {"message": "This model\\\'s maximum context length is 512 tokens."}}\'\n'
        "try:\n    r.raise_for_status()\nexcept requests.HTTPError as e:\n    print('raised', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(llmperf_mod.OBSERVER)},
    ).stdout
    assert "specbench-llmperf: server answered HTTP 400:" in out and "maximum context length is 512" in out
    assert "raised 400 Client Error" in out  # llmperf's own handling unchanged


def _spec(checkout, n=3, **kw):
    return LlmperfArgs(
        path=checkout,
        python=sys.executable,
        mean_input_tokens=60,
        mean_output_tokens=12,
        max_num_completed_requests=n,
        **kw,
    )


@pytest.mark.heavy
def test_subprocess_path_with_standin(tmp_path, checkout):
    spec = _spec(checkout)
    result = run_llmperf("http://127.0.0.1:9", "m", spec, tmp_path / "out", scrape=lambda: None)
    assert len(result.requests) == 3 and not any(r["error"] for r in result.requests)
    assert "standin llmperf running" in (tmp_path / "out" / "llmperf.log").read_text()
    write_outputs(result, tmp_path / "cell")
    written = json.loads((tmp_path / "cell" / "summary.json").read_text())
    ref = json.loads((FIXTURES / "m_60_12_summary.json").read_text())
    assert written["results_ttft_s_quantiles_p50"] == pytest.approx(ref["results_ttft_s_quantiles_p50"])
    assert written["specbench_itl_method"] == "llmperf_per_chunk" and written["specbench_load_driver"] == "llmperf"
    assert written["llmperf_output_tok_per_s"] == ref["results_mean_output_throughput_token_per_s"]
    assert written["specbench_output_tok_per_s"] is None  # no server counts: not llmperf's figure instead
    with pytest.raises(SpecbenchError, match=r"(?s)llmperf exited with status 5.*standin llmperf running"):
        run_llmperf("http://127.0.0.1:9", "fail", spec, tmp_path / "out2", scrape=lambda: None)
    with pytest.raises(DependencyError, match="git clone https://github.com/ray-project/llmperf"):
        run_llmperf("http://127.0.0.1:9", "m", LlmperfArgs(path=tmp_path, python=sys.executable), tmp_path / "o")
    with pytest.raises(DependencyError, match="load.llmperf.python"):
        run_llmperf(
            "http://127.0.0.1:9",
            "m",
            _spec(checkout) if False else LlmperfArgs(path=checkout, python=str(tmp_path / "no-python")),
            tmp_path / "o",
        )


@pytest.mark.heavy
def test_dropped_failed_request_is_counted(tmp_path, checkout, monkeypatch):
    """llmperf exits 0 with 2 of 3 rows; the server answered one request 400: it is a failed record."""
    monkeypatch.setenv("STANDIN_MODE", "drop")
    scrape = _server(_prom(10, 0, 10, 500), _prom(12, 1, 12, 526))
    result = run_llmperf("http://127.0.0.1:9", "m", _spec(checkout), tmp_path / "out", scrape=scrape)
    failed = [r for r in result.requests if r["error"]]
    assert len(result.requests) == 3 and len(failed) == 1
    assert failed[0]["llmperf_dropped"] and failed[0]["error_code"] == "4xx"
    assert failed[0]["error"].startswith("HTTP 4xx, dropped by llmperf: server answered HTTP 400")
    assert "400 Client Error" in failed[0]["error"]
    acc = result.sent.accounting
    assert (acc.requested, acc.recorded, acc.failed, acc.llmperf_started) == (3, 2, 1, 2)
    assert acc.server.generation_tokens == 26


def test_overshoot_is_stated(tmp_path, checkout):
    """llmperf recorded 3 of the 5 requests the server completed: the acceptance covers 2 more."""
    scrape = _server(_prom(10, 0, 10, 500), _prom(15, 0, 15, 560))
    result = run_llmperf("http://127.0.0.1:9", "m", _spec(checkout), tmp_path / "out", scrape=scrape)
    acc = result.sent.accounting
    assert acc.failed == 0 and acc.server_not_recorded == 2
    assert "covers 5 requests" in acc.acceptance_covers and "2 more" in acc.acceptance_covers


@pytest.mark.heavy
def test_all_failed_gives_failed_records_with_the_reason(tmp_path, checkout, monkeypatch):
    monkeypatch.setenv("STANDIN_MODE", "allfail")
    scrape = _server(_prom(10, 0, 10, 500), _prom(10, 3, 10, 500))
    result = run_llmperf("http://127.0.0.1:9", "m", _spec(checkout), tmp_path / "out", scrape=scrape)
    assert len(result.requests) == 3 and all(r["error"] for r in result.requests)
    assert "Warning Or Error: 400 Client Error" in result.requests[0]["error"]
    # The server's own message comes first (llmperf itself never records it).
    assert result.requests[0]["error"].startswith(
        'HTTP 4xx, dropped by llmperf: server answered HTTP 400: {"object":"error","message":"This model maximum'
    )
    assert result.sent.accounting.llmperf_exit_status == 1
    # Without server counts there is nothing to reconcile: one line with llmperf's own message.
    with pytest.raises(
        SpecbenchError,
        match=r"^llmperf exited with status 1: server answered "
        r"HTTP 400: .*maximum context length",
    ):
        run_llmperf("http://127.0.0.1:9", "m", _spec(checkout), tmp_path / "out2", scrape=lambda: None)


def test_wall_clock_limit_kills_the_process_group(tmp_path, checkout, monkeypatch):
    import psutil

    monkeypatch.setenv("STANDIN_MODE", "hang")
    monkeypatch.setattr(llmperf_mod, "STARTUP_GRACE_S", 0)
    monkeypatch.setattr(llmperf_mod, "REQUEST_TIMEOUT_S", 0)
    spec = _spec(checkout, test_timeout_s=0)  # a limit of 0 s: passed at the first poll it is checked
    log = tmp_path / "out" / "llmperf.log"
    calls = []

    def child_pid() -> int | None:
        found = re.search(r"standin child (\d+)", log.read_text()) if log.exists() else None
        return int(found.group(1)) if found else None

    def scrape():
        # Read before llmperf starts, then on each poll before the limit is checked: from the first
        # poll on, wait (at most 60 s) until the stand-in has started its child, so the limit is
        # only reached with the whole group up, however slowly a loaded machine starts it.
        calls.append(1)
        deadline = time.monotonic() + 60
        while len(calls) > 1 and child_pid() is None and time.monotonic() < deadline:
            time.sleep(0.01)

    with pytest.raises(SpecbenchError, match="wall-clock limit"):
        run_llmperf("http://127.0.0.1:9", "m", spec, tmp_path / "out", scrape=scrape, poll_s=0.1)
    pid = child_pid()
    assert pid is not None, "the stand-in was killed before it started its child"
    try:
        left = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        left = False
    assert not left, f"child {pid} of the killed llmperf still running"


@pytest.mark.heavy
def test_progress_from_tqdm(tmp_path, checkout, monkeypatch):
    monkeypatch.setenv("STANDIN_MODE", "progress")
    seen = []
    run_llmperf(
        "http://127.0.0.1:9",
        "m",
        _spec(checkout),
        tmp_path / "out",
        scrape=lambda: None,
        progress=lambda k, n: seen.append((k, n)),
    )
    assert seen[-1] == (3, 3) and seen == sorted(set(seen))  # each count once (chunks may merge redraws)


def test_server_counts_from_a_real_scrape():
    real = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
    prom = (real / "mla-on__output_norm-on__r0" / "metrics_after.prom").read_text()
    c = server_counts(prom)
    assert c["http"] == {"2xx": 22.0} and c["finished"]["length"] == 22.0 and c["generation_tokens"] == 1408.0


def test_cells_table_and_compare_read_one_meaning_per_column(tmp_path, checkout):
    """cells.csv's output_tok_per_s is the server-true figure and its itl_p50_ms never llmperf's per-chunk ITL."""
    from specbench.compare.sides import SideCell, _add_latency
    from specbench.io import read_jsonl_lines
    from specbench.records.files import CellRecord
    from specbench.results.store import cell_row

    scrape = _server(_prom(10, 0, 10, 500), _prom(13, 0, 13, 539))
    result = run_llmperf("http://127.0.0.1:9", "m", _spec(checkout), tmp_path / "out", scrape=scrape, poll_s=0.05)
    result.sent.summary_extra["specbench_output_tok_per_s"] = 39 / 2.0  # span depends on the poll timing
    write_outputs(result, tmp_path / "cell")
    summary = json.loads((tmp_path / "cell" / "summary.json").read_text())
    row = cell_row("r", CellRecord(cell_id="c", status="done"), None, summary)
    assert row["output_tok_per_s"] == 19.5 and row["itl_p50_ms"] is None
    assert row["llmperf_itl_per_chunk_p50_ms"] == pytest.approx(
        summary["results_inter_token_latency_s_quantiles_p50"] * 1000
    )
    cell = SideCell(key=(), name="c", axes={})
    requests = tmp_path / "cell" / "requests.jsonl"
    _add_latency(cell, read_jsonl_lines(requests), str(requests), summary)
    assert cell.summary["output_tok_per_s"] == [19.5] and "itl_p50_ms" not in cell.summary


def test_compare_says_when_runs_used_different_drivers():
    from specbench.compare.guard import mismatches
    from specbench.compare.sides import Side
    from specbench.records.files import Manifest

    def side(driver):
        return Side(
            path=Path(driver),
            label=driver,
            manifest=Manifest(run_id="r", cells=[], resolved_config={"load": {"driver": driver}}),
            cells={},
        )

    assert "load driver: baseline 'builtin', candidate 'llmperf'" in mismatches(side("builtin"), side("llmperf"))

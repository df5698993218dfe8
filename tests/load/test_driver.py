"""Driver pieces that need no vLLM (specbench/load/driver.py); the real-server tests are in test_driver_vllm.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from specbench.load.driver import LoadPlan, request_order, run_load, spec_counts
from specbench.load.prompt_sets import Prompt
from specbench.run.cells import supports_per_request_metrics

PROMPTS = [Prompt(f"p{i}", "chat", [{"role": "user", "content": f"q{i}"}]) for i in range(5)]


def test_request_order_is_seeded_and_cycles():
    spec = LoadPlan(num_requests=12, concurrency=2, max_tokens=4, seed=3)
    order = [p.id for p in request_order(PROMPTS, spec)]
    assert order == [p.id for p in request_order(PROMPTS, spec)]
    assert sorted(order[:5]) == [p.id for p in PROMPTS] and order[5:10] == order[:5]
    other = [p.id for p in request_order(PROMPTS, LoadPlan(num_requests=12, concurrency=2, max_tokens=4, seed=4))]
    assert other != order
    plain = LoadPlan(num_requests=5, concurrency=1, max_tokens=4, shuffle=False)
    assert [p.id for p in request_order(PROMPTS, plain)] == [p.id for p in PROMPTS]


def test_spec_counts_from_vllm_histogram():
    # Shape of vLLM 0.32's metrics.speculative_decoding (RequestSpecDecodeMetrics.to_dict).
    sd = {
        "mean_acceptance_length": 2.0,
        "draft_acceptance_rate": 0.4444,
        "acceptance_histogram": [2, 1, 0, 3],
        "num_spec_steps": 6,
        "num_accepted_draft_tokens": 10,
        "num_draft_tokens": 18,
        "num_spec_tokens": 3,
    }
    c = spec_counts(sd)
    assert c["num_drafts"] == 6 and c["draft_tokens"] == 18 and c["accepted_tokens"] == 10
    assert c["accepted_per_position"] == [4, 3, 3]
    assert sum(c["accepted_per_position"]) == c["accepted_tokens"]  # AL = 1 + sum p_i


def test_unreadable_per_request_metrics_lose_only_that_requests_acceptance():
    from specbench.load.driver import _final_usage

    rec = {"spec_decode": None}
    changed = {
        "usage": {"completion_tokens": 5, "prompt_tokens": 9},
        "metrics": {"speculative_decoding": {"histogram": [1, 2]}},
    }  # a renamed field
    _final_usage(changed, rec)
    assert rec["output_tokens"] == 5 and rec["input_tokens"] == 9
    assert rec["spec_decode"] is None and "acceptance_histogram" in rec["spec_decode_error"]


def test_supports_per_request_metrics():
    assert supports_per_request_metrics("0.32.0")
    assert supports_per_request_metrics("0.32.0+cpu")
    assert not supports_per_request_metrics("0.10.1") and not supports_per_request_metrics("0.28.2")
    assert supports_per_request_metrics("0.29.0")  # the oldest wheel whose arg_utils.py has the flag
    assert not supports_per_request_metrics(None)
    assert supports_per_request_metrics("usage: vllm serve\n  --per-request-spec-decode-metrics {none,summary}\n")
    assert not supports_per_request_metrics("usage: vllm serve\n  --max-model-len\n")


class _PlainSSE(BaseHTTPRequestHandler):
    """Stands in for an OpenAI-compatible server that sends neither token_ids nor per-chunk usage
    (and one that fails mid-stream): vLLM cannot be made to do either on demand."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fail = body["messages"][0]["content"] == "q1"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in ["a", "b", "c"]:
            self.wfile.write(f"data: {json.dumps({'choices': [{'delta': {'content': word}}]})}\n\n".encode())
            if fail:
                self.wfile.write(b'data: {"error": {"message": "engine died", "code": 500}}\n\n')
                return
        usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def plain_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _PlainSSE)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_per_chunk_fallback_and_stream_errors(plain_server):
    spec = LoadPlan(num_requests=2, concurrency=2, max_tokens=8, shuffle=False)
    ok, failed = run_load(plain_server, "m", PROMPTS[:2], spec).requests
    assert ok["error"] is None and ok["text"] == "abc" and ok["itl_method"] == "per_chunk"
    assert ok["output_tokens"] == 3 and len(ok["itl_s"]) == 2 and ok["input_tokens"] == 5
    assert ok["spec_decode"] is None
    assert failed["error_code"] == "stream_error" and "engine died" in failed["error"]


def test_connection_refused_is_recorded():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    res = run_load(f"http://127.0.0.1:{port}", "m", PROMPTS, LoadPlan(num_requests=2, concurrency=1, max_tokens=4))
    assert [r["error_code"] for r in res.requests] == ["ConnectError"] * 2


def test_bad_spec_rejected():
    with pytest.raises(ValueError):
        run_load("http://127.0.0.1:1", "m", PROMPTS, LoadPlan(num_requests=0, concurrency=1, max_tokens=4))

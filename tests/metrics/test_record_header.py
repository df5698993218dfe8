"""Every record a log line gives starts the same way (specbench/metrics/logs.py LineParser._header):
its source and format, the file and line it stands at, and the time and pid its prefix prints;
a spec line from vLLM also gets the engine id of its process's last Engine line."""

from __future__ import annotations

import pytest

from specbench.metrics.logs import LineParser

VLLM = "(APIServer pid=4242) INFO 12-02 13:26:42 [metrics.py:120] "
FAST_SPEC = (
    "SpecDecoding metrics: Mean acceptance length: 2.70, Accepted throughput: 12.30 tokens/s, "
    "Drafted throughput: 30.00 tokens/s, Accepted: 163 tokens, Drafted: 270 tokens, "
    "Per-position acceptance rate: 0.800, 0.600, 0.300, Avg Draft acceptance rate: 60.4%"
)
GENERAL_SPEC = "SpecDecoding metrics: Draft acceptance rate: 0.604, System efficiency: 0.700, Number of speculative tokens: 3, Number of accepted tokens: 163, Number of draft tokens: 270, Number of emitted tokens: 253."
FAST_ENGINE = "Engine 001: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs"
GENERAL_ENGINE = FAST_ENGINE + ", Running: 9 reqs"  # a repeated name: the general path
SGLANG = (
    "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, "
    "accept len: 2.10, accept rate: 0.55, gen throughput (token/s): 12.00, #queue-req: 0, "
)


@pytest.mark.parametrize(
    ("line", "source", "fmt", "time", "pid"),
    [
        (VLLM + FAST_SPEC, "vllm", "vllm-v1-mean-first", "12-02 13:26:42", 4242),
        (VLLM + GENERAL_SPEC, "vllm", None, "12-02 13:26:42", 4242),
        (VLLM + FAST_ENGINE, "vllm", "vllm-engine-stats", "12-02 13:26:42", 4242),
        (VLLM + GENERAL_ENGINE, "vllm", "vllm-engine-stats", "12-02 13:26:42", 4242),
        (SGLANG, "sglang", "sglang-decode-batch", "2025-10-22 10:27:57", None),
    ],
    ids=["vllm-fast", "vllm-general", "engine-fast", "engine-general", "sglang"],
)
def test_every_record_starts_with_its_place_and_prefix(line, source, fmt, time, pid):
    parser = LineParser(file="server.log")
    r = parser.parse_line(line, 17)
    assert r is not None
    assert (r.source, r.file, r.line, r.time, r.pid) == (source, "server.log", 17, time, pid)
    if fmt is not None:
        assert r.format == fmt
    else:
        assert r.format.startswith("vllm-")


@pytest.mark.parametrize("spec", [FAST_SPEC, GENERAL_SPEC], ids=["fast", "general"])
def test_a_vllm_spec_line_gets_its_process_engine_and_sglang_none(spec):
    parser = LineParser(file="server.log")
    parser.parse_line(VLLM + FAST_ENGINE, 1)
    assert parser.parse_line(VLLM + spec, 2).engine == 1
    other = parser.parse_line("(APIServer pid=7) INFO 12-02 13:26:43 [metrics.py:120] " + spec, 3)
    assert other.engine is None  # another process: no Engine line of its own yet
    assert parser.parse_line(SGLANG, 4).engine is None

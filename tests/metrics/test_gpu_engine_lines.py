"""GPU vLLM 0.31-0.34 stats lines with data parallelism, built from the wheels' format strings:

- vllm/v1/spec_decode/metrics.py:120 (0.30-0.34, identical): ``"SpecDecoding metrics: Mean acceptance
  length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d
  tokens, Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%"``;
  it never carries an engine prefix;
- vllm/v1/metrics/loggers.py: the throughput line before it carries the prefix, per engine
  ``"Engine {:03d}: "`` (0.31:170, 0.32/0.33:178; 0.34 an f-string of the same text) or, with
  ``--aggregate-engine-logging``, ``"{} Engines Aggregated: "`` (0.31:358, 0.32/0.33:373).
"""

from __future__ import annotations

from specbench.analysis.rates import total
from specbench.metrics.parse import parse_text
from specbench.metrics.record import SpecDecodeRecord
from specbench.run.collect import log_windows

SPEC = (
    "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: "
    "%.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, "
    "Avg Draft acceptance rate: %.1f%%"
)
STATS = (
    "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, "
    "Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%"
)
LOGGERS = "(APIServer pid=50) INFO 12-03 16:02:10 [loggers.py:335] "
METRICS = "(APIServer pid=50) INFO 12-03 16:02:10 [metrics.py:120] "


def _pair(prefix: str, accepted: list[int], drafts: int) -> str:
    k = len(accepted)
    per_pos = ", ".join(f"{a / drafts:.3f}" for a in accepted)
    spec = SPEC % (
        1 + sum(accepted) / drafts,
        10.0,
        20.0,
        sum(accepted),
        k * drafts,
        per_pos,
        100 * sum(accepted) / (k * drafts),
    )
    return f"{LOGGERS}{prefix}{STATS % (1.0, 2.0, 1, 0, 0.1, 0.0)}\n{METRICS}{spec}\n"


def _spec(text: str) -> list[SpecDecodeRecord]:
    return [r for r in parse_text(text, file="gpu.log") if isinstance(r, SpecDecodeRecord)]


def test_per_engine_lines_are_keyed_by_their_engine():
    text = _pair("Engine 000: ", [13, 10, 6], 20) + _pair("Engine 001: ", [8, 5, 2], 10)
    recs = _spec(text)
    assert [(r.engine, r.accepted_tokens, r.draft_tokens) for r in recs] == [(0, 29, 60), (1, 15, 30)]
    windows, _ = log_windows(text, 0)
    assert (total(windows).accepted_tokens, total(windows).draft_tokens) == (44, 90)


def test_aggregated_lines_parse_as_one_window_of_no_single_engine():
    text = _pair("2 Engines Aggregated: ", [21, 15, 8], 30) * 2
    recs = _spec(text)
    assert [(r.engine, r.accepted_tokens, r.draft_tokens) for r in recs] == [(None, 44, 90), (None, 44, 90)]
    windows, _ = log_windows(text, 0)
    assert (total(windows).accepted_tokens, total(windows).draft_tokens) == (88, 180)


def test_an_aggregated_line_after_per_engine_lines_does_not_inherit_an_engine():
    text = _pair("Engine 001: ", [8, 5, 2], 10) + _pair("2 Engines Aggregated: ", [21, 15, 8], 30)
    assert [r.engine for r in _spec(text)] == [1, None]

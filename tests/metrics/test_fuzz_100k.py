"""The log parser fed 100,000 random and mutated inputs never raises and returns well-formed records.

Hypothesis at 100k examples is too slow for the suite, so the inputs come from a seeded generator:
real lines (tests/metrics/data excerpts, the committed CPU baseline's vLLM log and /metrics scrape)
and one printed summary of each multi-line family, mutated by byte flips, truncation, digit swaps,
number replacements (signs, exponents, nan/inf, huge, non-ASCII digits), inserted separators and
markers, spliced and shuffled fields, plus random bytes. Each input goes through ``parse_text``;
all of them together, as one file, go through ``parse_file`` (in small chunks, so the chunked scan
crosses many boundaries) and must give exactly what line-by-line ``parse_lines`` gives.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import yaml

from specbench.metrics import parse
from specbench.metrics.parse import parse_file, parse_lines, parse_text
from specbench.metrics.record import EngineStatsRecord, SpecDecodeRecord

ROOT = Path(__file__).resolve().parents[2]
N_INPUTS = 100_000
BASELINE = ROOT / "results" / "baselines" / "cpu-default" / "mla-on__output_norm-on__r0"
BENCH_SERVE = """---------------Speculative Decoding---------------
Acceptance rate (%):                     58.40
Acceptance length:                       2.75
Drafts:                                  100
Draft tokens:                            300
Accepted tokens:                         175
Per-position acceptance (%):
  Position 0:                            88.20
  Position 1:                            55.90
==================================================
"""
OFFLINE = """total_num_output_tokens: 1234
num_drafts: 100
num_draft_tokens: 300
num_accepted_tokens: 175
mean acceptance length: 2.75
--------------------------------------------------
acceptance at token 0: 0.88
acceptance at token 1: 0.56
"""
NUMBERS = [
    "-1",
    "-0",
    "+7",
    "1e309",
    "-1e309",
    "1e-320",
    "nan",
    "NaN%",
    "inf",
    "-inf",
    "9" * 40,
    "0.0.1",
    "",
    "1,000",
    "1_000",
    "\u0663\u0664",
    "\uff15",
    "0x1F",
    ".",
    "-",
    "e5",
    "3.",
    ".5",
    "1e5%",
    "100.0%%",
]
SEPARATORS = [
    ", ",
    ",",
    ":",
    ": ",
    "%",
    ",,",
    " tokens",
    "\t",
    "\r",
    "\x1b[0m",
    "\x1b[32m",
    "\x00",
    "\ufffd",
    "Position 0:",
    "metrics:",
    "SpecDecoding metrics: ",
    "Speculative metrics: ",
    "Engine 000: ",
    "Decode batch. ",
    "accept len: ",
    "Per-position acceptance rate: ",
    "{",
    "}",
    '"',
    "\n",
    " " * 30,
    "num_drafts: ",
    "acceptance at token 9: ",
    "---Speculative Decoding---",
    "# TYPE x counter\n",
]
INT_FIELDS = (
    "line",
    "pid",
    "engine",
    "num_spec_tokens",
    "num_drafts",
    "draft_tokens",
    "accepted_tokens",
    "emitted_tokens",
    "current_depth",
)


def _seeds() -> tuple[list[str], list[str]]:
    """(single lines, multi-line blocks) of every format family."""
    excerpts = yaml.safe_load((ROOT / "tests" / "metrics" / "data" / "real_excerpts.yaml").read_text())
    lines = [e["text"] for e in excerpts]
    log = (BASELINE / "server.log").read_text(errors="replace").splitlines()
    spec = [ln for ln in log if "SpecDecoding" in ln or "Engine 000" in ln]
    lines += spec * 5 + log[:: max(1, len(log) // 100)]  # weight the lines that hold records
    prom = (BASELINE / "metrics_after.prom").read_text().splitlines()
    spec_prom = [i for i, ln in enumerate(prom) if "spec_decode" in ln]
    blocks = [BENCH_SERVE, OFFLINE]
    for start in range(spec_prom[0], spec_prom[-1], 12):
        blocks.append("\n".join(prom[max(0, start - 2) : start + 20]))
    return lines, blocks


def _mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        pos = rng.randint(0, len(text))
        if op == 0 and text:  # byte flip
            text = text[:pos] + chr(rng.randrange(0xD800)) + text[pos + 1 :]
        elif op == 1:  # truncation
            text = text[:pos]
        elif op == 2:  # digit swap
            digits = [i for i, ch in enumerate(text) if ch.isdigit()]
            if digits:
                i = rng.choice(digits)
                text = text[:i] + str(rng.randrange(10)) * rng.choice([1, 1, 1, 25]) + text[i + 1 :]
        elif op == 3:  # a number replaced by an extreme or malformed one
            digits = [i for i, ch in enumerate(text) if ch.isdigit()]
            if digits:
                i = rng.choice(digits)
                j = i
                while j < len(text) and (text[j].isdigit() or text[j] == "."):
                    j += 1
                text = text[:i] + rng.choice(NUMBERS) + text[j:]
        elif op == 4:  # inserted separator or marker
            text = text[:pos] + rng.choice(SEPARATORS) + text[pos:]
        elif op == 5 and text:  # duplicated or deleted slice
            end = rng.randint(pos, min(len(text), pos + 40))
            text = text[:pos] + (text[pos:end] * 2 if rng.random() < 0.5 else "") + text[end:]
        elif op == 6:  # fields shuffled
            parts = text.split(", ")
            rng.shuffle(parts)
            text = ", ".join(parts)
        else:  # random bytes spliced in
            noise = bytes(rng.randrange(256) for _ in range(rng.randint(1, 30))).decode("utf-8", "replace")
            text = text[:pos] + noise + text[pos:]
    return text


def _inputs(seed: int = 20261203) -> list[str]:
    rng = random.Random(seed)
    lines, blocks = _seeds()
    out = []
    for _ in range(N_INPUTS):
        kind = rng.random()
        if kind < 0.06:  # pure random bytes
            out.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))).decode("utf-8", "replace"))
        elif kind < 0.16:
            out.append(_mutate(rng.choice(blocks), rng))
        elif kind < 0.22:  # two lines spliced
            a, b = rng.choice(lines), rng.choice(lines)
            out.append(a[: rng.randint(0, len(a))] + b[rng.randint(0, len(b)) :])
        else:
            out.append(_mutate(rng.choice(lines), rng))
    return out


def _check(rec, n_lines: int) -> None:
    assert isinstance(rec, (SpecDecodeRecord, EngineStatsRecord)), rec
    d = rec.to_dict()
    json.dumps(d, allow_nan=False)  # no NaN / inf reaches a record
    if d["source"] == "prometheus":
        assert d["line"] is None, d  # a scrape's counters have no one line
    else:
        assert 1 <= d["line"] <= max(n_lines, 1), d
    for name, value in d.items():
        if name in INT_FIELDS:
            assert value is None or (isinstance(value, int) and not isinstance(value, bool)), (name, d)
        elif isinstance(value, float):
            assert math.isfinite(value), (name, d)
        elif isinstance(value, list):
            assert value and all(isinstance(v, (int, float)) and math.isfinite(v) for v in value), (name, d)
    if isinstance(rec, SpecDecodeRecord):
        assert rec.source in ("vllm", "sglang", "prometheus", "vllm-bench-serve", "vllm-offline"), d
        if rec.accepted_per_position is not None:
            assert all(isinstance(v, int) for v in rec.accepted_per_position), d


@pytest.fixture(scope="module")
def inputs() -> list[str]:
    return _inputs()


@pytest.mark.slow
def test_100k_mutated_inputs_never_raise(inputs):
    assert len(inputs) == N_INPUTS
    n_records = 0
    for text in inputs:
        records = parse_text(text)
        n_lines = len(text.splitlines())
        for rec in records:
            _check(rec, n_lines)
        n_records += len(records)
    # The mutations must leave many inputs parseable, or the test only exercises rejection.
    assert n_records > N_INPUTS // 4, n_records


@pytest.mark.slow
def test_100k_inputs_as_one_file_match_line_by_line(inputs, tmp_path, monkeypatch):
    # Plain log lines first: the head (4 KiB) decides the file is a log, not a /metrics scrape.
    head = "INFO plain log line, no metrics here\n" * 120
    text = head + "\n".join(inputs) + "\n"
    path = tmp_path / "fuzz.log"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    monkeypatch.setattr(parse, "CHUNK_BYTES", 100_003)  # ~170 chunks: many boundaries
    got = [r.to_dict() for r in parse_file(path).records]
    want = [r.to_dict() for r in parse_lines(text.split("\n"), file=str(path))]
    assert len(got) > N_INPUTS // 4
    assert got == want


# Regressions the fuzzer found, each on a minimal input.
def test_non_finite_counter_leaves_field_null():
    scrape = (
        '# TYPE vllm:spec_decode_num_drafts counter\nvllm:spec_decode_num_drafts_total{engine="0"} 10.0\n'
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n"
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} +Inf\n'
        '# TYPE vllm:spec_decode_num_draft_tokens counter\nvllm:spec_decode_num_draft_tokens_total{engine="0"} NaN\n'
    )
    (rec,) = parse_text(scrape)
    assert (rec.num_drafts, rec.draft_tokens, rec.accepted_per_position) == (10, None, None)


def test_lone_carriage_return_does_not_shift_line_numbers(tmp_path):
    line = "SpecDecoding metrics: Draft acceptance rate: 58.4%, Accepted: 163 tokens, Drafted: 279 tokens"
    path = tmp_path / "cr.log"
    path.write_text(f"progress 10%\rprogress 20%\n{OFFLINE}{line}\n")  # a summary: the line-by-line path
    assert [r.line for r in parse_file(path).records] == [2, 10]


def test_summary_cut_by_a_chunk_boundary_is_whole(tmp_path, monkeypatch):
    path = tmp_path / "cut.log"
    path.write_text("x" * 90 + "\n" + OFFLINE)
    monkeypatch.setattr(parse, "CHUNK_BYTES", 128)  # the boundary falls inside the block
    (rec,) = parse_file(path).records
    assert (rec.line, rec.num_drafts, rec.per_position_acceptance) == (2, 100, [0.88, 0.56])

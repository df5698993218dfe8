"""Property-based: generated lines of every format parse back to the values they were made from;
random and mutated input never raises."""

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.metrics.parse import parse_lines, parse_prometheus, parse_text

PREFIXES = st.sampled_from(
    [
        "",
        "INFO 10-16 19:05:47 metrics.py:367] ",
        "INFO 07-16 18:05:38 [metrics.py:87] ",
        "(APIServer pid=123) INFO 12-02 13:26:42 [metrics.py:120] ",
        "2026-12-02T10:00:00.123Z stdout F ",
        "    ",
        "\x1b[32mINFO\x1b[0m 12-02 13:26:42 [metrics.py:120] ",
        "myhost | worker-3 | ",
    ]
)
counts = st.integers(min_value=0, max_value=10**7)
rates = st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=8).map(
    lambda xs: [x / 1000 for x in xs]
)


@given(PREFIXES, counts, counts, rates, st.integers(0, 10**4), st.integers(0, 1000), st.integers(0, 10**5))
def test_mean_first_roundtrip(prefix, acc, drafted, pos, al, rate, thr):
    pos_s = ", ".join(f"{p:.3f}" for p in pos)
    line = (
        f"{prefix}SpecDecoding metrics: Mean acceptance length: {al / 100:.2f}, Accepted throughput: {thr / 100:.2f} tokens/s, "
        f"Drafted throughput: {thr / 10:.2f} tokens/s, Accepted: {acc} tokens, Drafted: {drafted} tokens, "
        f"Per-position acceptance rate: {pos_s}, Avg Draft acceptance rate: {rate / 10:.1f}%"
    )
    (r,) = parse_text(line)
    assert (r.accepted_tokens, r.draft_tokens) == (acc, drafted)
    assert r.mean_acceptance_length == round(al / 100, 2)
    assert r.per_position_acceptance == [round(p, 3) for p in pos]
    assert abs(r.draft_acceptance_rate - rate / 1000) < 1e-9
    assert r.accepted_throughput == round(thr / 100, 2)


@given(PREFIXES, counts, counts, st.integers(0, 1000), st.booleans(), st.booleans())
def test_rate_first_roundtrip(prefix, acc, drafted, rate, with_mean, with_pos):
    parts = [f"Draft acceptance rate: {rate / 10:.1f}%"]
    if with_mean:
        parts.append("Mean acceptance length: 2.75")
    parts += [f"Accepted: {acc} tokens", f"Drafted: {drafted} tokens"]
    if with_pos:
        parts.append("Per-position acceptance rate: 0.882, 0.559")
    (r,) = parse_text(prefix + "SpecDecoding metrics: " + ", ".join(parts))
    assert (r.accepted_tokens, r.draft_tokens, r.format) == (acc, drafted, "vllm-v1-rate-first")
    assert abs(r.draft_acceptance_rate - rate / 1000) < 1e-9
    assert r.mean_acceptance_length == (2.75 if with_mean else None)
    assert r.per_position_acceptance == ([0.882, 0.559] if with_pos else None)


@given(PREFIXES, counts, counts, counts, st.integers(1, 10), st.sampled_from(["tokens", "tokens tokens"]))
def test_v0_roundtrip(prefix, acc, drafted, emitted, k, spelling):
    line = (
        f"{prefix}Speculative metrics: Draft acceptance rate: 0.642, System efficiency: 0.598, Number of speculative "
        f"tokens: {k}, Number of accepted tokens: {acc}, Number of draft {spelling}: {drafted}, Number of emitted tokens: {emitted}."
    )
    (r,) = parse_text(line)
    assert (r.num_spec_tokens, r.accepted_tokens, r.draft_tokens, r.emitted_tokens) == (k, acc, drafted, emitted)
    assert r.cumulative and r.format == "vllm-v0"


@given(counts, counts, st.integers(0, 200), st.integers(0, 100), st.integers(0, 100))
def test_sglang_roundtrip(a, b, alen, arate, thr):
    line = (
        f"[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: {a}, token usage: 0.00, "
        f"accept len: {alen / 100:.2f}, accept rate: {arate / 100:.2f}, gen throughput (token/s): {thr}.00, #queue-req: {b}, "
    )
    (r,) = parse_text(line)
    assert r.mean_acceptance_length == round(alen / 100, 2) and r.draft_acceptance_rate == round(arate / 100, 2)


@given(st.dictionaries(st.sampled_from(["0", "1", "2"]), st.tuples(counts, counts, counts), min_size=1))
def test_prometheus_roundtrip(engines):
    lines = [
        "# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts counter",
    ]
    for e, (d, _t, _a) in engines.items():
        lines.append(f'vllm:spec_decode_num_drafts_total{{engine="{e}",model_name="m"}} {d}.0')
        lines.append(f'vllm:spec_decode_num_drafts_created{{engine="{e}",model_name="m"}} 1.7e9')
    lines += ["# TYPE vllm:spec_decode_num_draft_tokens counter"]
    lines += [f'vllm:spec_decode_num_draft_tokens_total{{engine="{e}"}} {t}.0' for e, (d, t, a) in engines.items()]
    lines += ["# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter"]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",position="{i}"}} {a + i}.0'
        for e, (d, t, a) in engines.items()
        for i in range(2)
    ]
    recs = {r.engine: r for r in parse_prometheus("\n".join(lines) + "\n")}
    for e, (d, t, a) in engines.items():
        assert recs[int(e)].num_drafts == d and recs[int(e)].draft_tokens == t
        assert recs[int(e)].accepted_per_position == [a, a + 1]


FUZZ = int(os.environ.get("SPECBENCH_FUZZ_EXAMPLES", "300"))
SEEDS = [
    "SpecDecoding metrics: Mean acceptance length: 2.70, Accepted: 163 tokens, Drafted: 279 tokens, Per-position acceptance rate: 0.882, 0.559",
    "Speculative metrics: Draft acceptance rate: 0.642, Number of draft tokens tokens: 5, ",
    "[x] Decode batch. accept len: nan, accept rate: ",
    "Engine 000: Avg prompt throughput: 1.1 tokens/s, Running: 0 reqs",
    "---------------Speculative Decoding---------------\nDrafts: 3\n  Position 0: 1e999\n",
    "num_drafts: x\nacceptance at token 0: nan\n",
    '# TYPE vllm:spec_decode_num_drafts counter\nvllm:spec_decode_num_drafts_total{engine="x"} nan\n',
]


@settings(max_examples=FUZZ, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(SEEDS),
    st.lists(st.tuples(st.integers(0, 200), st.text(max_size=6)), max_size=6),
    st.text(max_size=80),
)
def test_mutated_input_never_raises(seed, edits, noise):
    text = seed
    for pos, ins in edits:
        pos = pos % (len(text) + 1)
        text = text[:pos] + ins + text[pos + 1 :]
    parse_text(text + noise)
    list(parse_lines([text, noise, text]))


@settings(max_examples=FUZZ, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data):
    text = data.decode("utf-8", "replace")
    parse_text(text)
    parse_prometheus(text)

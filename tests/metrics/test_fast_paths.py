"""The per-line fast paths (specbench/metrics/logs.py FAST_SPEC_RE / FAST_ENGINE_RE) give exactly
what the general field-by-field path gives, on every line, and real vLLM 0.32 lines take them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_fuzz_100k import NUMBERS, SEPARATORS, _mutate

from specbench.metrics import logs
from specbench.metrics.logs import LineParser

BASELINES = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
PREFIX = "(APIServer pid={pid}) INFO 12-02 20:57:{s:02d} [{mod}] "


def _dec(rng: random.Random) -> str:
    return rng.choice(
        [
            "0",
            "0.0",
            "100.0",
            "2.70",
            "12.30",
            "0.608",
            "1" * 15,
            "9" * 15 + "." + "9" * 15,
            f"{rng.uniform(0, 500):.{rng.randint(0, 4)}f}",
        ]
    )


def _int(rng: random.Random) -> str:
    return rng.choice(["0", "7", "163", "9" * 15, str(rng.randint(0, 10**6))])


def _spec_line(rng: random.Random) -> str:
    pos = ", ".join(_dec(rng) for _ in range(rng.randint(1, 8)))
    return (
        PREFIX.format(pid=rng.randint(1, 99999), s=rng.randint(0, 59), mod="metrics.py:120")
        + f"SpecDecoding metrics: Mean acceptance length: {_dec(rng)}, Accepted throughput: {_dec(rng)} tokens/s, "
        f"Drafted throughput: {_dec(rng)} tokens/s, Accepted: {_int(rng)} tokens, Drafted: {_int(rng)} tokens, "
        f"Per-position acceptance rate: {pos}, Avg Draft acceptance rate: {_dec(rng)}%"
    )


def _engine_line(rng: random.Random) -> str:
    tail = rng.choice(
        [
            "",
            ", GPU KV cache usage: 1.2%",
            ", CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
            ", Running: 9 reqs",
            ", Prefix cache hit rate: 0.0%, Waiting: 3 reqs",
            ", Avg prompt throughput: 1.0%",
        ]
    )
    return (
        PREFIX.format(pid=rng.randint(1, 99999), s=rng.randint(0, 59), mod="loggers.py:335")
        + f"Engine {rng.randint(0, 12):03d}: Avg prompt throughput: {_dec(rng)} tokens/s, Avg generation "
        f"throughput: {_dec(rng)} tokens/s, Running: {_int(rng)} reqs, Waiting: {_int(rng)} reqs{tail}"
    )


PREFIXES = [
    "(EngineCore_DP0 pid=77) WARNING 12-02 20:57:{s:02d}.123 [{mod}] ",
    "INFO 12-02 20:57:{s:02d} [{mod}] ",
    "(APIServer pid=0x1) INFO 12-02 20:57:{s:02d} [{mod}] ",
    "(A pid=5) INFO 2026-12-02 20:57:{s:02d} [{mod}] ",
    "[{mod}] (APIServer pid=9) INFO 12-02 20:57:{s:02d} ",
    "(APIServer pid=3) INFO 12-02 20:57:{s:02d} [{mod}]  ",
]


def _lines(n: int, seed: int = 13) -> list[str]:
    rng = random.Random(seed)
    real = [
        ln.rstrip("\n")
        for f in sorted(BASELINES.glob("*/server.log"))
        for ln in f.read_text(errors="replace").splitlines()
        if "SpecDecoding" in ln or "Engine 0" in ln
    ]
    out = list(real)
    for _ in range(n):
        line = rng.choice([_spec_line, _engine_line])(rng) if rng.random() < 0.8 else rng.choice(real)
        if rng.random() < 0.1:  # another prefix: the general prefix reading
            head, _, rest = line.partition("] ")
            line = rng.choice(PREFIXES).format(s=rng.randint(0, 59), mod="metrics.py:120") + rest
        # Half stay well-formed (the fast path), half are mutated (mostly the general path; some
        # mutations, e.g. a digit swap, keep the fast path with other values).
        if rng.random() < 0.5:
            line = _mutate(line, rng) if rng.random() < 0.7 else _splice(line, rng)
        out.append(line)
    return out


def _splice(line: str, rng: random.Random) -> str:
    pos = rng.randint(0, len(line))
    return line[:pos] + rng.choice(NUMBERS + SEPARATORS) + line[pos:]


def _records(lines: list[str], fast: bool, monkeypatch) -> list:
    monkeypatch.setattr(logs, "FAST_PATHS", fast)
    parser = LineParser("f.log")  # one parser: engine ids carry from engine lines to spec lines
    return [
        (r.to_dict() if r is not None else None) for r in (parser.parse_line(ln, i) for i, ln in enumerate(lines, 1))
    ]


@pytest.mark.heavy
def test_fast_paths_equal_the_general_path(monkeypatch):
    lines = _lines(20_000)
    fast = _records(lines, True, monkeypatch)
    general = _records(lines, False, monkeypatch)
    assert fast == general
    # The comparison means something only if both paths ran often, and on lines the general path
    # rejects too.
    assert sum(_fast_spec_matches(ln) for ln in lines) > 4_000
    assert sum(_fast_engine_matches(ln) for ln in lines) > 4_000
    assert sum(r is None for r in general) > 1_000


def _fast_spec_matches(line: str) -> bool:
    i = line.find("SpecDecoding metrics:")
    return i >= 0 and logs.FAST_SPEC_RE.fullmatch(line[i + len("SpecDecoding metrics:") :]) is not None


def _fast_engine_matches(line: str) -> bool:
    m = logs.ENGINE_RE.search(line)
    return m is not None and logs.FAST_ENGINE_RE.fullmatch(line[m.start() :].split(":", 1)[1]) is not None


@pytest.mark.parametrize("kind", ["SpecDecoding", "Engine 000"])
def test_real_vllm_032_lines_take_the_fast_path(kind):
    lines = [ln for f in sorted(BASELINES.glob("*/server.log")) for ln in f.read_text().splitlines() if kind in ln]
    assert lines
    for ln in lines:
        if kind == "Engine 000":
            assert _fast_engine_matches(ln), ln
        else:
            assert _fast_spec_matches(ln), ln


def test_to_dict_is_the_canonical_order_and_a_copy():
    from dataclasses import asdict

    from specbench.metrics.record import EngineStatsRecord, SpecDecodeRecord

    for rec in (
        SpecDecodeRecord(
            source="vllm",
            format="f",
            line=3,
            accepted_per_position=[5, 2],
            per_position_acceptance=[0.5, 0.2],
            draft_tokens=9,
        ),
        EngineStatsRecord(source="vllm", format="vllm-engine-stats", engine=1, running_reqs=4),
    ):
        d = asdict(rec)
        want = {"kind": d.pop("kind"), **d}
        got = rec.to_dict()
        assert list(got.items()) == list(want.items())
        for name, value in got.items():
            if isinstance(value, list):
                value.append(0)  # the caller's copy: the record keeps its own
                assert getattr(rec, name) == want[name]


def test_is_candidate_checks_every_prefilter_marker():
    assert logs.PREFILTER == (
        "metrics:",
        "Decode batch",
        "Avg prompt throughput",  # spelled out in is_candidate
        "Draft acceptance rate:",
    )
    for marker in logs.PREFILTER:
        assert logs.is_candidate(f"x {marker} y") and not logs.is_candidate(f"x {marker[:-1]} y")


def test_position_cap_is_the_same_on_the_fast_path(monkeypatch):
    """A line of vLLM 0.32's shape with more than MAX_POSITIONS rates is dropped to its other fields
    with a warning on either path (the fast regex once kept all of them, silently)."""
    for n in (logs.MAX_POSITIONS - 1, logs.MAX_POSITIONS, logs.MAX_POSITIONS + 1):
        line = (
            PREFIX.format(pid=7, s=0, mod="metrics.py:120") + "SpecDecoding metrics: Mean acceptance length: 2.70, "
            "Accepted throughput: 12.30 tokens/s, Drafted throughput: 20.10 tokens/s, Accepted: 163 tokens, "
            f"Drafted: 279 tokens, Per-position acceptance rate: {', '.join(['0.500'] * n)}, "
            "Avg Draft acceptance rate: 58.4%"
        )
        got = []
        for fast in (True, False):
            monkeypatch.setattr(logs, "FAST_PATHS", fast)
            parser = LineParser("f.log")
            rec = parser.parse_line(line, 1)
            got.append((rec.to_dict(), parser.warnings))
        assert got[0] == got[1], n
        assert (got[0][0]["per_position_acceptance"] is None) == (n > logs.MAX_POSITIONS), n


ACCESS = '(APIServer pid=4242) INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _dense_log(rng: random.Random) -> str:
    """Blocks of a dense server log: most blocks only vLLM 0.32 stats lines (the bulk reader's),
    some with other lines mixed in (mutated, other prefixes, pasted continuations, non-ASCII)."""
    odd = _lines(600, seed=29)[-600:]
    out = []
    for block in range(120):
        mixed = block % 4 == 3
        for _ in range(rng.randint(5, 60)):
            line = rng.choice([_spec_line, _engine_line])(rng)
            if mixed and rng.random() < 0.2:
                line = rng.choice(
                    odd
                    + [
                        line + "\n  Number of drafts: 9",
                        line + "\r",
                        "caf\u00e9 " + line,
                        line.replace("INFO", "INFO\u00e9"),
                        line + "\n",
                        "| " + line + " |",
                    ]
                )
            out.append(line)
            if block % 4 == 1 and rng.random() < 0.05:  # no marker: only the line shape tells it joins
                out.append(rng.choice(["  Number of drafts: 9", ", 0.125", "Current speculative depth: 2"]))
            out += [ACCESS.format(port=rng.randint(30000, 60000)) for _ in range(rng.randint(0, 8))]
    return "\n".join(out) + "\n"


@pytest.mark.heavy
def test_bulk_chunks_equal_the_per_hit_and_line_by_line_paths(tmp_path, monkeypatch):
    """parse_file with the bulk reader offered every chunk (small chunks, so many all-stats chunks and
    many mixed ones) gives exactly the records and warnings of the hit-by-hit path and of the general
    line-by-line parser."""
    from specbench.metrics import bulk
    from specbench.metrics import parse as parse_mod

    path = tmp_path / 'd"ense\u00e9.log'  # a name json escapes
    text = _dense_log(random.Random(5))
    path.write_bytes(text.encode("utf-8"))
    taken = []
    read_chunk = bulk.read_chunk

    def counting(*args):
        got = read_chunk(*args)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(bulk, "read_chunk", counting)
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 4096)

    def run(fast: bool, min_hits: int, engine_stats: bool = True, as_json: bool = False):
        monkeypatch.setattr(logs, "FAST_PATHS", fast)
        monkeypatch.setattr(parse_mod, "BULK_MIN_HITS", min_hits)
        res = parse_mod.parse_file(path, engine_stats=engine_stats, as_json=as_json)
        return [r if as_json else r.to_dict() for r in res.records], res.warnings

    bulk_run = run(True, 0)
    assert sum(taken) > 30 and taken.count(False) > 10  # both outcomes, often
    per_hit = run(True, 10**9)
    general = run(False, 0)
    assert bulk_run == per_hit == general
    monkeypatch.setattr(logs, "FAST_PATHS", False)
    by_line = [r.to_dict() for r in parse_mod.parse_lines(text.split("\n"), file=str(path))]
    assert bulk_run[0] == by_line
    no_engine = run(True, 0, engine_stats=False)
    assert no_engine[0] == [r for r in bulk_run[0] if r["kind"] != "engine_stats"]
    # As JSON lines (what `parse --format jsonl` writes; the bulk reader writes them from its
    # matches): json.dumps of the same records, byte for byte.
    n = len(taken)
    for engine_stats, want in ((True, bulk_run), (False, no_engine)):
        lines, warnings = run(True, 0, engine_stats=engine_stats, as_json=True)
        assert lines == [json.dumps(r) for r in want[0]] and warnings == want[1]
    assert sum(taken[n:]) > 60
    assert len(bulk_run[0]) > 2000


def test_bulk_marker_counts_are_those_of_its_lines():
    """read_chunk rules out other candidate lines by counting the prefilter markers: each line it
    takes must hold exactly the counts it assumes, whatever its numbers and tail."""
    from specbench.metrics import bulk

    rng = random.Random(3)
    for _ in range(300):
        line = rng.choice([_spec_line, _engine_line])(rng)
        m = bulk.BULK_RE.search(line.encode())
        if m is None:
            continue
        per = bulk.PER_SPEC_LINE if "SpecDecoding" in line else bulk.PER_ENGINE_LINE
        for marker in logs.PREFILTER:
            assert line.count(marker) == per.get(marker, 0), (marker, line)

"""Hostile input: capped line length and positions, each warned as file:line; linear field reading;
bounded memory on a line longer than any chunk. Structural checks first (what the parser is given,
what it keeps); the few timings have limits hundreds of times above the linear cost, so only a
quadratic regression (minutes) trips them."""

import time
import tracemalloc

import pytest

from specbench.metrics import logs, parse
from specbench.metrics.parse import parse_file, parse_text

PREFIX = "(APIServer pid=7) INFO 12-02 13:26:42 [metrics.py:120] SpecDecoding metrics: "
HEAD = "Mean acceptance length: 2.70, Accepted: 5 tokens, Drafted: 9 tokens, Per-position acceptance rate: "


def test_a_10mb_line_is_read_up_to_the_cap_and_warned(tmp_path, monkeypatch):
    path = tmp_path / "hostile.log"
    path.write_text("plain line\n" + PREFIX + HEAD + "0.5, " * 2_000_000 + "Avg Draft acceptance rate: 5.0%\nlast\n")
    seen = []
    real = logs.LineParser.parse_line
    monkeypatch.setattr(
        logs.LineParser, "parse_line", lambda self, raw, n, cut=False: seen.append(len(raw)) or real(self, raw, n, cut)
    )
    res = parse_file(path)
    assert max(seen) <= logs.MAX_LINE_CHARS  # the parser is never handed more than the cap
    (rec,) = res.records
    # Kept: what stands whole before the cap; dropped: the list the cap cut (never a shorter list).
    assert (rec.line, rec.pid, rec.accepted_tokens, rec.draft_tokens, rec.mean_acceptance_length) == (2, 7, 5, 9, 2.7)
    assert rec.per_position_acceptance is None and rec.draft_acceptance_rate is None
    assert any(w.startswith(f"{path}:2: line longer than the cap") for w in res.warnings), res.warnings


def test_text_input_has_the_same_cap(monkeypatch):
    seen = []
    real = logs.LineParser.parse_line
    monkeypatch.setattr(
        logs.LineParser, "parse_line", lambda self, raw, n, cut=False: seen.append(len(raw)) or real(self, raw, n, cut)
    )
    (rec,) = parse_text(PREFIX + HEAD + "0.5, " * 2_000_000)
    assert seen == [logs.MAX_LINE_CHARS]
    assert (rec.accepted_tokens, rec.per_position_acceptance) == (5, None)


def test_a_line_longer_than_every_chunk_is_never_held_whole(tmp_path, monkeypatch):
    path = tmp_path / "long.log"
    with open(path, "w") as fh:
        fh.write(PREFIX + HEAD + "0.5, " * 6_000_000 + "\n")  # 30 MB, one line
        fh.write(PREFIX + HEAD + "0.5, 0.25, Avg Draft acceptance rate: 5.0%\n")
    monkeypatch.setattr(parse, "CHUNK_BYTES", 1 << 20)
    tracemalloc.start()
    try:
        res = parse_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak  # a few chunks, not the 30 MB line
    assert [r.line for r in res.records] == [1, 2]
    assert res.records[1].per_position_acceptance == [0.5, 0.25]


def test_positions_over_the_cap_drop_the_list_and_keep_the_record(tmp_path):
    path = tmp_path / "k.log"
    many = ", ".join(["0.500"] * (logs.MAX_POSITIONS + 1))
    ok = ", ".join(["0.500"] * logs.MAX_POSITIONS)
    path.write_text(
        f"{PREFIX}{HEAD}{many}, Avg Draft acceptance rate: 5.0%\n{PREFIX}{HEAD}{ok}, Avg Draft acceptance rate: 5.0%\n"
    )
    res = parse_file(path)
    over, at_cap = res.records
    assert over.per_position_acceptance is None and (over.accepted_tokens, over.draft_acceptance_rate) == (5, 0.05)
    assert len(at_cap.per_position_acceptance) == logs.MAX_POSITIONS
    assert [w for w in res.warnings if "per-position" in w] == [
        f"{path}:1: {logs.MAX_POSITIONS + 1} per-position values, over the cap of {logs.MAX_POSITIONS}: "
        "per-position values dropped, the record's other fields kept"
    ]


def test_summary_positions_over_the_cap(tmp_path):
    path = tmp_path / "offline.txt"
    path.write_text(
        "num_drafts: 10\nmean acceptance length: 1.5\nacceptance at token 0: 0.5\n"
        f"acceptance at token {logs.MAX_POSITIONS}: 0.1\n"
    )
    res = parse_file(path)
    (rec,) = res.records
    assert (rec.num_drafts, rec.per_position_acceptance) == (10, None)
    assert any(w.startswith(f"{path}:4: position {logs.MAX_POSITIONS} is over the cap") for w in res.warnings)


def test_warnings_are_capped(tmp_path):
    path = tmp_path / "many.log"
    line = PREFIX + HEAD + ", ".join(["0.5"] * 300) + ", Avg Draft acceptance rate: 5.0%\n"
    path.write_text(line * 50)
    res = parse_file(path)
    assert len(res.records) == 50
    capped = [w for w in res.warnings if "per-position" in w]
    assert len(capped) == logs.MAX_WARNINGS
    assert f"{path}: {50 - logs.MAX_WARNINGS} more warning(s) like these" in res.warnings


@pytest.mark.parametrize(
    "line",
    [
        "Engine " + "0" * 60_000 + " x Avg prompt throughput: 1",  # was quadratic: "0*" then "\d+"
        "num_drafts" + " " * 60_000 + "x",  # was quadratic: lazy label + "\s*:"
        PREFIX + "Mean acceptance length: 2.70" + "," * 60_000,  # commas: one list per value
        PREFIX + "Mean acceptance length: 2.70, " + "a:" * 30_000,  # 30,000 names
        PREFIX + HEAD + "0.5, " * 12_000,  # under the line cap, over the position cap
    ],
)
def test_hostile_lines_under_the_cap_are_linear(line):
    t0 = time.process_time()
    parse_text(line + "\n" + line)
    assert time.process_time() - t0 < 5.0  # linear: ~10 ms; the quadratic paths took minutes


@pytest.mark.heavy
def test_pairs_read_per_colon_equal_the_per_comma_reference():
    import random

    from specbench.metrics.fields import pairs, pairs_per_comma

    rng = random.Random(7)
    for _ in range(20_000):  # up to 200 characters: both of pairs' branches (under / over 32 commas)
        body = "".join(
            rng.choice("ab #:,. 1\u00e9\t%-x,,,:") for _ in range(rng.randint(0, 200))
        )  # commas often enough for both branches
        assert pairs(body) == pairs_per_comma(body), body


def test_numbers_longer_than_python_converts_never_raise(tmp_path):
    """Python refuses int() of a string over sys.get_int_max_str_digits() (4300) digits. Such a
    number in a pid, an engine index or a count once ended `specbench parse` in "unexpected
    ValueError ... report it" (exit 2); now the field is not read and the rest of the record is."""
    import subprocess
    import sys

    huge = "9" * (sys.get_int_max_str_digits() + 1)
    head = "INFO 12-02 13:26:42 [metrics.py:120] SpecDecoding metrics: "
    rec = "Mean acceptance length: 2.75, Accepted: 163 tokens, Drafted: 279 tokens, Per-position acceptance rate: 0.882, 0.559, 0.312"
    lines = [
        f"(EngineCore_DP0 pid={huge}) {head}{rec}",
        f"(APIServer pid=7) INFO 12-02 13:26:43 [loggers.py:1] Engine {huge}: Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs",
        f"(APIServer pid=7) {head}{rec.replace('163', huge)}",
        f"(EngineCore_DP0 pid=8) {head}{rec}",
    ]
    path = tmp_path / "huge.log"
    path.write_text("\n".join(lines) + "\n")
    res = parse_file(path)
    spec = [r for r in res.records if r.kind == "spec_decode"]
    assert [(r.line, r.pid, r.accepted_tokens, r.draft_tokens) for r in spec] == [
        (1, None, 163, 279),
        (3, 7, None, 279),
        (4, 8, 163, 279),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "parse", str(path), "--format", "jsonl"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "unexpected" not in proc.stderr, proc.stderr
    assert len(proc.stdout.splitlines()) == 3

"""A chunk of a dense vLLM 0.32 log read whole by one compiled regex, not one hit at a time.

Under a short stats interval a server writes a SpecDecoding window and an Engine line every few
lines. Read hit by hit, each costs ~10 µs of Python (marker searches, a decode, the prefix and body
regexes, keyword arguments). Here one ``finditer`` over the chunk finds every line of vLLM 0.32's
exact shape (the per-line fast paths' shapes in ``logs``, behind vLLM's own prefix) and each record
is built from the match's groups with positional arguments -- or, for `specbench parse --format
jsonl`, written straight as its JSON line from a template (numbers' texts cached by their printed
bytes), never built as an object.

All or nothing per chunk: the chunk's marker counts must show that these lines are its only
candidate lines, and every match must carry vLLM's prefix; otherwise :func:`read_chunk` returns
None and the caller reads the chunk hit by hit. So what a log gives never depends on which path
read it (tests/metrics/test_fast_paths.py checks it chunk by chunk against the other paths).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from specbench.metrics.logs import _DEC, _INT, FAST_SPEC_RE, PREFILTER
from specbench.metrics.record import EngineStatsRecord, SpecDecodeRecord

# The Engine line's optional tail, limited to the names vLLM 0.32 prints there as percentages
# (none holds a marker, "throughput", "running" or "waiting", as the per-line path requires).
_TAIL = r"(?:[A-Z]{1,8} KV cache usage|Prefix cache hit rate|External prefix cache hit rate|MM cache hit rate)"
# Anchored at "] " (vLLM's "[metrics.py:120] "): access-log lines hold no "]", so the regex engine's
# literal-prefix scan skips them at C speed. The line must end at a newline followed by another
# line of vLLM's ("(") or at the chunk's end: a line after it that does not start with "(" could
# continue it as a hand-wrapped record, which only the per-hit path reads. Run on the chunk's bytes
# (no decoding pass): every byte a match takes is ASCII, so its text is its UTF-8 decoding.
BULK_RE = re.compile(
    (
        r"\] (?:SpecDecoding metrics:"
        + FAST_SPEC_RE.pattern
        + rf"|Engine ({_INT}): Avg prompt throughput: ({_DEC}) tokens/s, Avg generation throughput: ({_DEC}) tokens/s, "
        rf"Running: ({_INT}) reqs, Waiting: ({_INT}) reqs(?:, {_TAIL}: {_DEC}%){{0,8}})(?=\n\(|\n?\Z)"
    ).encode()
)
# The line before the "] ": a subset of logs._VLLM_PREFIX_RE, which holds no prefilter marker
# (the module ends in ".py", so "[metrics:120]" is not read here).
PREFIX_RE = re.compile(rb"\(\w+ pid=(\d{1,15})\) [A-Z]+ (\d\d-\d\d \d\d:\d\d:\d\d) \[[\w.]*\.py:\d{1,9}")
# How often each prefilter marker occurs in one line of each shape (prefix, numbers and tail names
# hold none): when a chunk's counts are these sums, no other line of it is a candidate.
PER_SPEC_LINE = {"metrics:": 1, "Draft acceptance rate:": 1}
PER_ENGINE_LINE = {"Avg prompt throughput": 1}
_MARKERS = tuple((m.encode(), PER_SPEC_LINE.get(m, 0), PER_ENGINE_LINE.get(m, 0)) for m in PREFILTER)
# vLLM prints the rate with one decimal: few distinct values, each converted once.
_RATES: dict[bytes, float] = {}


class _Texts(dict):
    """Printed number (bytes) → json's text for the float it reads as, filled on first use."""

    def __init__(self, convert) -> None:
        super().__init__()
        self._convert = convert

    def __missing__(self, raw: bytes) -> str:
        text = repr(self._convert(raw))
        if len(self) < 65536:
            self[raw] = text
        return text


_FLOAT_TEXT = _Texts(float)
_RATE_TEXT = _Texts(lambda raw: round(float(raw) / 100.0, 12))
# The JSON lines of the records read here, as record_json.json_line writes them (byte for byte:
# tests/metrics/test_fast_paths.py compares them on every line of its logs).
SPEC_JSON = (
    '{"kind": "spec_decode", "source": "vllm", "format": "vllm-v1-mean-first", "file": %s, "line": %d, '
    '"time": "%s", "pid": %d, "engine": %s, "cumulative": false, "num_spec_tokens": null, "num_drafts": null, '
    '"draft_tokens": %d, "accepted_tokens": %d, "emitted_tokens": null, "accepted_per_position": null, '
    '"per_position_acceptance": [%s], "mean_acceptance_length": %s, "draft_acceptance_rate": %s, '
    '"accepted_throughput": %s, "drafted_throughput": %s, "system_efficiency": null, "current_depth": null}'
)
ENGINE_JSON = (
    '{"kind": "engine_stats", "source": "vllm", "format": "vllm-engine-stats", "file": %s, "line": %d, '
    '"time": "%s", "pid": %d, "engine": %d, "prompt_throughput": %s, "generation_throughput": %s, '
    '"running_reqs": %d, "waiting_reqs": %d}'
)


def read_chunk(
    buf: bytes,
    cut: int,
    lineno: int,
    file: str | None,
    engine_by_pid: dict[int | None, int | None],
    engine_stats: bool = True,
    as_json: bool = False,
) -> tuple[list, int] | None:
    """``(records, number of the chunk's last line)`` for ``buf[:cut]``, whose first line is
    ``lineno + 1``; None when the chunk holds a candidate line this reader does not take (then
    nothing was changed, ``engine_by_pid`` included). ``engine_stats=False``: Engine lines only
    give their engine ids, no records. ``as_json``: each record as its JSON line (str) instead,
    never built as an object (what `specbench parse --format jsonl` writes)."""
    spec_out, engine_out = _builders(file, engine_stats, as_json)
    records: list = []
    append = records.append
    engines = dict(engine_by_pid)
    prefix_match = PREFIX_RE.fullmatch
    find, count = buf.rfind, buf.count
    line, prev, n_engine, n_spec = lineno + 1, 0, 0, 0
    for m in BULK_RE.finditer(buf, 0, cut):
        end = m.start()
        start = find(b"\n", 0, end) + 1
        prefix = prefix_match(buf, start, end)
        if prefix is None:
            return None
        line += count(b"\n", prev, start)
        prev = start
        pid_s, time = prefix.groups()
        pid = int(pid_s)
        groups = m.groups()
        engine = groups[7]
        if engine is None:
            n_spec += 1
            append(spec_out(line, time, pid, engines.get(pid), groups))
        else:
            n_engine += 1
            engines[pid] = engine_id = int(engine)
            if engine_out is not None:
                append(engine_out(line, time, pid, engine_id, groups))
    if not _only_candidates(buf, cut, n_spec, n_engine):
        return None
    engine_by_pid.update(engines)
    newlines = line - 1 - lineno + count(b"\n", prev, cut)
    return records, lineno + newlines + (cut > 0 and buf[cut - 1] != 10)


def _only_candidates(buf: bytes, cut: int, n_spec: int, n_engine: int) -> bool:
    """Whether ``buf[:cut]``'s marker counts show its ``n_spec`` + ``n_engine`` lines read are all
    its candidate lines."""
    count = buf.count
    for marker, per_spec, per_engine in _MARKERS:
        if count(marker, 0, cut) != n_spec * per_spec + n_engine * per_engine:
            return False
    return True


# One matched line (line number, time, pid, engine id, the match's groups) -> what read_chunk keeps.
# Chosen once per chunk, as closures over its file, so read_chunk's loop tests no format flag per
# line; the call per line costs ~2% on a dense log (benchmarks/parse_throughput.py --layout dense).
_Builder = Callable[[int, bytes, int, "int | None", tuple], Any]


def _builders(file: str | None, engine_stats: bool, as_json: bool) -> tuple[_Builder, _Builder | None]:
    """The SpecDecoding line's and the Engine line's builders (None: Engine lines give no records)."""
    spec, engine = _json_builders(file) if as_json else _record_builders(file)
    return spec, engine if engine_stats else None


def _json_builders(file: str | None) -> tuple[_Builder, _Builder]:
    file_json = json.dumps(file)
    floats, rate_texts = _FLOAT_TEXT, _RATE_TEXT

    def spec(line, time, pid, eng, groups):
        mal, acc_tp, dr_tp, acc, drafted, per_pos, dar = groups[:7]
        return SPEC_JSON % (
            file_json,
            line,
            time.decode(),
            pid,
            "null" if eng is None else eng,
            int(drafted),
            int(acc),
            ", ".join(map(floats.__getitem__, per_pos.split(b", "))),
            floats[mal],
            rate_texts[dar],
            floats[acc_tp],
            floats[dr_tp],
        )

    def engine(line, time, pid, engine_id, groups):
        prompt, gen, running, waiting = groups[8:]
        return ENGINE_JSON % (
            file_json,
            line,
            time.decode(),
            pid,
            engine_id,
            floats[prompt],
            floats[gen],
            int(running),
            int(waiting),
        )

    return spec, engine


def _record_builders(file: str | None) -> tuple[_Builder, _Builder]:
    rates = _RATES

    def spec(line, time, pid, eng, groups):
        mal, acc_tp, dr_tp, acc, drafted, per_pos, dar = groups[:7]
        rate = rates.get(dar)
        if rate is None:
            rate = round(float(dar) / 100.0, 12)
            if len(rates) < 4096:
                rates[dar] = rate
        # Positional, in SpecDecodeRecord's field order (keywords cost twice as much here).
        return SpecDecodeRecord(
            "vllm",
            "vllm-v1-mean-first",
            file,
            line,
            time.decode(),
            pid,
            eng,
            False,
            None,
            None,
            int(drafted),
            int(acc),
            None,
            None,
            list(map(float, per_pos.split(b", "))),
            float(mal),
            rate,
            float(acc_tp),
            float(dr_tp),
        )

    def engine(line, time, pid, engine_id, groups):
        prompt, gen, running, waiting = groups[8:]
        return EngineStatsRecord(
            "vllm",
            "vllm-engine-stats",
            file,
            line,
            time.decode(),
            pid,
            engine_id,
            float(prompt),
            float(gen),
            int(running),
            int(waiting),
        )

    return spec, engine

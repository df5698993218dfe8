"""vLLM and SGLang log lines → canonical records.

Formats (each a ``format`` id in the record):
- ``vllm-v0``: ``Speculative metrics: Draft acceptance rate: 0.642, System efficiency: 0.598, Number of
  speculative tokens: 3, Number of accepted tokens: ..., Number of draft tokens[ tokens]: ..., Number of
  emitted tokens: ...`` — cumulative since the server started.
- ``vllm-v1-early``: ``Speculative metrics: Draft acceptance rate: 1.000, Number of accepted tokens: 66,
  Number of draft tokens: 66, `` — one logging interval.
- ``vllm-v1-rate-first``: ``SpecDecoding metrics: Draft acceptance rate: 58.4%, [Mean acceptance length: 2.75,]
  [Accepted throughput: ..., Drafted throughput: ...,] Accepted: 163 tokens, Drafted: 279 tokens[, Per-position
  acceptance rate: ...]``.
- ``vllm-v1-mean-first``: ``SpecDecoding metrics: Mean acceptance length: 2.70, Accepted throughput: ...,
  ..., Avg Draft acceptance rate: 58.4%`` (current).
- ``sglang-decode-batch``: ``Decode batch. #running-req: 1, ..., accept len: 3.02, [accept rate: 0.67,] ...``.
- ``vllm-engine-stats``: ``Engine 000: Avg prompt throughput: ...`` → an EngineStatsRecord that gives its
  engine id to the next spec line of the same process (``N Engines Aggregated: ...``: engine None).
Any prefix before the marker is accepted (timestamps, levels, ``[metrics.py:87]``, ``(APIServer pid=1)``,
collector prefixes, ANSI colours, Markdown bullets, quote marks, table pipes, inline code), and so is a
line pasted without its marker when it starts at ``Draft acceptance rate:`` or ``Mean acceptance length:``.
Pasted text is read as :mod:`specbench.metrics.paste` describes (inline code and table cells end the
record, "..." elides, hand-wrapped lines join, a field cut at a fixed width is dropped); a record quoted
inside a sentence is prose, not a record.

Hostile input stays linear: a line is read up to ``MAX_LINE_CHARS`` (the field cut there is dropped)
and a record claiming more than ``MAX_POSITIONS`` per-position values keeps its other fields only;
both leave a warning naming file:line.
"""

from __future__ import annotations

import re
from typing import Any

from specbench.metrics import paste
from specbench.metrics.fields import fraction, integer, number, number_list, pairs, strip_ansi
from specbench.metrics.record import EngineStatsRecord, Record, SpecDecodeRecord
from specbench.records.counts import MAX_POSITIONS

SPEC_MARKERS = ("SpecDecoding metrics:", "Speculative metrics:")
SGLANG_MARKER = "Decode batch"
ENGINE_MARKER = "Avg prompt throughput"
# A record pasted without its marker starts at one of these (old V0 lines at the first).
BARE_MARKERS = ("Draft acceptance rate:", "Mean acceptance length:")
# Cheap substring prefilter: a line without any of these cannot be a record. Each costs the chunked
# scan a pass over every byte, so marker-less lines are found by the first bare marker only: V0 and
# rate-first lines start there, current lines end with "Avg Draft acceptance rate:".
PREFILTER = ("metrics:", "Decode batch", "Avg prompt throughput", "Draft acceptance rate:")
# Far above any real line (a vLLM stats line with k = 64 is ~700 characters) and small enough that
# reading a capped line stays in the microseconds; the cut field is dropped (see _trusted).
MAX_LINE_CHARS = 65536
# vLLM sets no maximum on num_speculative_tokens; real ones stay well under 64. A record claiming
# more than MAX_POSITIONS (the counts model's cap) keeps its counts but not its per-position values
# (downstream code sizes arrays by k).
MAX_WARNINGS = 20

# Integers a log field can hold have at most 15 digits (as in the fast paths): Python refuses to
# convert a string of more than 4300 digits (ValueError), which a damaged or hostile line can carry.
PID_RE = re.compile(r"\bpid=(\d{1,15})\)")
TIME_RE = re.compile(
    r"\b(\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)\b|\b(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)"
)
# No "0*" before the digits: overlapping repeats backtrack quadratically on a line of zeros.
# "Engine 000: " per engine, or "2 Engines Aggregated: " with --aggregate-engine-logging (vLLM
# 0.31-0.34 loggers.py): an aggregated line is no single engine's, so its spec line gets engine None.
ENGINE_RE = re.compile(r"(?:Engine\s+(\d{1,15})|\b\d{1,15} Engines Aggregated)\s*:\s*Avg prompt throughput")

# Fast paths for the lines a vLLM 0.32 server prints every stats interval, read by one compiled
# regex instead of field by field (about 3x faster per line). They must give exactly what the
# general path gives (tests/metrics/test_fast_paths.py checks it line by line), so they only take
# what that path reads unambiguously: plain decimals (no sign, exponent or nan), integers short
# enough to survive its float round trip, each field once, at most MAX_POSITIONS per-position values
# (more take the general path, which drops them with a warning). Anything else takes the general path.
FAST_PATHS = True
_DEC = r"\d{1,15}(?:\.\d{1,15})?"
_INT = r"\d{1,15}"
FAST_SPEC_RE = re.compile(
    rf" Mean acceptance length: ({_DEC}), Accepted throughput: ({_DEC}) tokens/s, "
    rf"Drafted throughput: ({_DEC}) tokens/s, Accepted: ({_INT}) tokens, Drafted: ({_INT}) tokens, "
    rf"Per-position acceptance rate: ({_DEC}(?:, {_DEC}){{0,{MAX_POSITIONS - 1}}}), Avg Draft acceptance rate: ({_DEC})%"
)
FAST_ENGINE_RE = re.compile(
    rf" Avg prompt throughput: ({_DEC}) tokens/s, Avg generation throughput: ({_DEC}) tokens/s, "
    rf"Running: ({_INT}) reqs, Waiting: ({_INT}) reqs((?:, [A-Za-z][A-Za-z ]*: {_DEC}%)*)"
)

# name (lower case) → (record field, converter)
SPEC_FIELDS = {
    "draft acceptance rate": ("draft_acceptance_rate", fraction),
    "avg draft acceptance rate": ("draft_acceptance_rate", fraction),
    "mean acceptance length": ("mean_acceptance_length", number),
    "accepted throughput": ("accepted_throughput", number),
    "drafted throughput": ("drafted_throughput", number),
    "accepted": ("accepted_tokens", integer),
    "drafted": ("draft_tokens", integer),
    "per-position acceptance rate": ("per_position_acceptance", number_list),
    "system efficiency": ("system_efficiency", fraction),
    "number of speculative tokens": ("num_spec_tokens", integer),
    "number of accepted tokens": ("accepted_tokens", integer),
    "number of draft tokens": ("draft_tokens", integer),
    "number of draft tokens tokens": ("draft_tokens", integer),
    "number of emitted tokens": ("emitted_tokens", integer),
    "number of drafts": ("num_drafts", integer),
    "num drafts": ("num_drafts", integer),
    "drafts": ("num_drafts", integer),
    "current speculative depth": ("current_depth", integer),
}
SGLANG_FIELDS = {
    "accept len": ("mean_acceptance_length", number),
    "accept length": ("mean_acceptance_length", number),
    "avg accept len": ("mean_acceptance_length", number),
    "accept rate": ("draft_acceptance_rate", fraction),
}
# Names a hand-wrapped record's next line may start with.
FIELD_NAMES = frozenset(SPEC_FIELDS) | frozenset(SGLANG_FIELDS)


def is_candidate(line: str) -> bool:
    # Spelled out rather than any(... for p in PREFILTER): this runs once per metric line of
    # multi-GB logs, and the generator costs more than the searches.
    return (
        "metrics:" in line
        or "Avg prompt throughput" in line
        or "Decode batch" in line
        or "Draft acceptance rate:" in line
    )


def _bare_start(line: str) -> int:
    """Where a record pasted without its marker starts, or -1 ("Avg Draft acceptance rate:" is the
    end of a current line, not a start)."""
    best = -1
    for marker in BARE_MARKERS:
        idx = line.find(marker)
        while idx >= 4 and line[idx - 4 : idx] == "Avg ":
            idx = line.find(marker, idx + 1)
        if idx >= 0 and (best < 0 or idx < best):
            best = idx
    return best


_BARE_PREFIX_STRIP = " \t>*+-|`\"'"


def _bare_prefix_ok(prefix: str) -> bool:
    """Before a marker-less record only paste decoration, a table row's cells, or a log prefix
    (ending in "]" or ")") may stand: "The Draft acceptance rate: 0.6 was low" is prose."""
    rest = prefix.strip(_BARE_PREFIX_STRIP)
    return not rest or rest.endswith(("]", ")")) or prefix.lstrip().startswith("|")


# vLLM's own prefix, "(APIServer pid=1) INFO 12-02 13:26:42 [metrics.py:120] ": TIME_RE and PID_RE
# find exactly these two groups in it, in about twice the time.
_VLLM_PREFIX_RE = re.compile(r"\(\w+ pid=(\d{1,15})\) [A-Z]+ (\d{2}-\d{2} \d{2}:\d{2}:\d{2}) \[[\w.]+:\d+\] ")


def _prefix_meta(prefix: str) -> tuple[str | None, int | None]:
    if FAST_PATHS:
        fast = _VLLM_PREFIX_RE.fullmatch(prefix)
        if fast is not None:
            return fast.group(2), int(fast.group(1))
    m = TIME_RE.search(prefix)
    time = (m.group(1) or m.group(2)) if m else None
    p = PID_RE.search(prefix)
    return time, (int(p.group(1)) if p else None)


# A value that ends with one of these was printed whole; any other last value may have been cut
# at a fixed width (a terminal, a screenshot, a table column) and is trusted only as _trusted says.
_CLOSED_ENDS = (",", ".", "%", "tokens", "tokens/s", "reqs")
# Decimals vLLM/SGLang print for a field; a last, unclosed value with fewer was cut.
PRECISION = {
    "mean_acceptance_length": 2,
    "draft_acceptance_rate": 3,
    "system_efficiency": 3,
    "accepted_throughput": 1,
    "drafted_throughput": 1,
}
SGLANG_PRECISION = {"mean_acceptance_length": 2, "draft_acceptance_rate": 2}


class LineParser:
    """Stateful over one file: remembers each process's last engine id (data-parallel engines) and
    collects warnings (capped lines, capped positions), each naming file:line."""

    def __init__(self, file: str | None = None) -> None:
        self.file = file
        self.engine_by_pid: dict[int | None, int | None] = {}  # pid → the engine id of its last Engine line
        self.warnings: list[str] = []
        self.more_warnings = 0

    def warn(self, lineno: int, message: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(f"{self.file or '<text>'}:{lineno}: {message}")
        else:
            self.more_warnings += 1

    def all_warnings(self) -> list[str]:
        more = (
            [f"{self.file or '<text>'}: {self.more_warnings} more warning(s) like these"] if self.more_warnings else []
        )
        return self.warnings + more

    def parse_line(self, raw: str, lineno: int, cut: bool = False) -> Record | None:
        """One line (or hand-wrapped lines joined); ``cut``: the line was cut at MAX_LINE_CHARS."""
        if not is_candidate(raw):
            return None
        line = strip_ansi(raw).rstrip("\r\n")
        for marker in SPEC_MARKERS:
            idx = line.find(marker)
            if idx >= 0:
                return self._spec(line, idx, marker, lineno, cut)
        idx = line.find(SGLANG_MARKER)
        if idx >= 0:
            return self._sglang(line, idx, lineno, cut)
        m = ENGINE_RE.search(line)
        if m:
            return self._engine(line, m, lineno)
        idx = _bare_start(line)
        if idx >= 0:
            return self._spec(line, idx, "", lineno, cut)
        return None

    def _spec(self, line: str, idx: int, marker: str, lineno: int, cut: bool) -> SpecDecodeRecord | None:
        prefix = line[:idx]
        located = paste.locate(prefix, line[idx + len(marker) :])
        if located is None or (not marker and not _bare_prefix_ok(prefix)):
            return None
        body = located[0]
        if FAST_PATHS and marker == "SpecDecoding metrics:" and not cut:
            fast = FAST_SPEC_RE.fullmatch(body)
            if fast is not None:
                return self._fast_spec(fast, prefix, lineno)
        if "..." in body or "\u2026" in body:
            body = paste.elide(body)
        all_pairs = pairs(body)
        names = [name for name, _ in all_pairs]
        if not names or names[0] not in SPEC_FIELDS:
            return None
        values: dict[str, Any] = {}  # field -> parsed value, splatted into the record
        for name, raw in self._trusted(all_pairs, body, cut, SPEC_FIELDS, PRECISION):
            spec = SPEC_FIELDS.get(name)
            if spec is None or spec[0] in values:
                continue
            if spec[1] is number_list and raw.count(",") >= MAX_POSITIONS:
                self.warn(
                    lineno,
                    f"{raw.count(',') + 1} per-position values, over the cap of {MAX_POSITIONS}: "
                    "per-position values dropped, the record's other fields kept",
                )
                continue
            converted = spec[1](raw)
            if converted is not None:
                values[spec[0]] = converted
        numeric = sum(isinstance(v, (int, float, list)) for v in values.values())
        if not numeric and "nan" not in body.lower():
            return None
        if not marker and numeric < 2:  # a marker-less fragment needs two values to be a record
            return None
        fmt, cumulative = _spec_format(marker or _bare_marker(names), names)
        head = self._header("vllm", fmt, prefix, lineno)
        return SpecDecodeRecord(**head, engine=self.engine_by_pid.get(head["pid"]), cumulative=cumulative, **values)

    def _header(self, source: str, fmt: str, prefix: str, lineno: int) -> dict[str, Any]:
        """What every record of a line starts with: its source and format, where it stands
        (file, line) and what its prefix says (time, pid)."""
        time, pid = _prefix_meta(prefix)
        return {"source": source, "format": fmt, "file": self.file, "line": lineno, "time": time, "pid": pid}

    @staticmethod
    def _trusted(all_pairs: list[tuple[str, str]], body: str, cut: bool, fields: dict, precision: dict):
        """The pairs to read: all of them, less the last one where the text may have been cut inside
        it (a value never read whole is dropped, never guessed: "Drafted: 27" of "279 tokens")."""
        end = body.rstrip()
        if not all_pairs or (not cut and end.endswith(_CLOSED_ENDS) and not end.endswith(".")):
            return all_pairs
        spec = fields.get(all_pairs[-1][0])
        if not cut and end.endswith(".") and (spec is None or spec[1] is integer):
            return all_pairs  # V0 ends its last count with a full stop; "4." is a cut decimal
        if not cut:
            # Cut inside the next field's name ("..., Drafted: 15 tokens, Per-pos"): the comma
            # closed the last value. A number there instead is the rest of a list.
            tail = body.rsplit(",", 1)[-1].strip() if "," in body else ""
            if tail and ":" not in tail and tail[0] not in "0123456789.+-":
                return all_pairs
        if spec is None:
            return all_pairs[:-1] if cut else all_pairs
        if not cut:
            raw = all_pairs[-1][1]
            if spec[1] is number_list:
                # vLLM prints every rate with the same decimals; a shorter last one was cut.
                items = [x for x in (s.strip() for s in raw.split(",")) if x]
                places = {paste.decimals(x) for x in items}
                if len(places) == 1 and (len(items) > 1 or places == {3}):
                    return all_pairs
            elif spec[1] is not integer and paste.decimals(raw) >= precision.get(spec[0], 3):
                return all_pairs
        return all_pairs[:-1]

    def _fast_spec(self, m: re.Match[str], prefix: str, lineno: int) -> SpecDecodeRecord:
        mal, acc_tp, dr_tp, acc, drafted, per_pos, dar = m.groups()
        head = self._header("vllm", "vllm-v1-mean-first", prefix, lineno)
        return SpecDecodeRecord(
            **head,
            engine=self.engine_by_pid.get(head["pid"]),
            cumulative=False,
            accepted_tokens=int(acc),
            draft_tokens=int(drafted),
            per_position_acceptance=[float(x) for x in per_pos.split(", ")],
            mean_acceptance_length=float(mal),
            draft_acceptance_rate=round(float(dar) / 100.0, 12),
            accepted_throughput=float(acc_tp),
            drafted_throughput=float(dr_tp),
        )

    def _sglang(self, line: str, idx: int, lineno: int, cut: bool) -> SpecDecodeRecord | None:
        prefix = line[:idx]
        located = paste.locate(prefix, line[idx + len(SGLANG_MARKER) :])
        if located is None:
            return None
        body = located[0].lstrip(". ")
        if "..." in body or "\u2026" in body:
            body = paste.elide(body)
        values: dict[str, Any] = {}  # field -> parsed value, splatted into the record
        seen = False
        for name, raw in self._trusted(pairs(body), body, cut, SGLANG_FIELDS, SGLANG_PRECISION):
            spec = SGLANG_FIELDS.get(name)
            if spec is None:
                continue
            seen = True
            converted = spec[1](raw)
            if converted is not None and spec[0] not in values:
                values[spec[0]] = converted
        if not seen:
            return None
        return SpecDecodeRecord(
            **self._header("sglang", "sglang-decode-batch", prefix, lineno), cumulative=False, **values
        )

    def _engine(self, line: str, m: re.Match[str], lineno: int) -> EngineStatsRecord | None:
        prefix = line[: m.start()]
        located = paste.locate(prefix, line[m.start() :])
        if located is None:
            return None
        engine = int(m.group(1)) if m.group(1) is not None else None
        head = self._header("vllm", "vllm-engine-stats", prefix, lineno)
        self.engine_by_pid[head["pid"]] = engine
        rest = located[0].split(":", 1)[1]
        fast = FAST_ENGINE_RE.fullmatch(rest) if FAST_PATHS else None
        if fast is not None:
            prompt, generation, running, waiting, tail = fast.groups()
            low = tail.lower()
            # A repeated name would override the first value in the general path's dict.
            if "throughput" not in low and "running" not in low and "waiting" not in low:
                return EngineStatsRecord(
                    **head,
                    engine=engine,
                    prompt_throughput=float(prompt),
                    generation_throughput=float(generation),
                    running_reqs=int(running),
                    waiting_reqs=int(waiting),
                )
        vals = dict(pairs(rest))
        return EngineStatsRecord(
            **head,
            engine=engine,
            prompt_throughput=number(vals.get("avg prompt throughput", "")),
            generation_throughput=number(vals.get("avg generation throughput", "")),
            running_reqs=integer(vals.get("running", "")),
            waiting_reqs=integer(vals.get("waiting", "")),
        )


def _bare_marker(names: list[str]) -> str:
    """The marker a marker-less line would have had, judged by its field names."""
    if "system efficiency" in names or any(n.startswith("number of") for n in names):
        return "Speculative metrics:"
    return "SpecDecoding metrics:"


def _spec_format(marker: str, names: list[str]) -> tuple[str, bool]:
    if marker.startswith("Speculative"):
        if (
            "system efficiency" in names
            or "number of speculative tokens" in names
            or any(n.startswith("number of emitted") for n in names)
        ):
            return "vllm-v0", True
        return "vllm-v1-early", False
    if names and names[0] == "mean acceptance length":
        return "vllm-v1-mean-first", False
    return "vllm-v1-rate-first", False

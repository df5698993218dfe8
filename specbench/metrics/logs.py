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
  engine id to the next spec line of the same process.
Any prefix before the marker is accepted (timestamps, levels, ``[metrics.py:87]``, ``(APIServer pid=1)``,
collector prefixes, ANSI colours) except one that quotes the line (backticks, quotes, Markdown bullets):
those are prose mentioning a metric, not records.
"""

from __future__ import annotations

import re

from specbench.metrics.fields import fraction, integer, number, number_list, pairs, strip_ansi
from specbench.metrics.record import EngineStatsRecord, Record, SpecDecodeRecord

SPEC_MARKERS = ("SpecDecoding metrics:", "Speculative metrics:")
SGLANG_MARKER = "Decode batch"
ENGINE_MARKER = "Avg prompt throughput"
# Cheap substring prefilter: a line without any of these cannot be a record.
PREFILTER = ("metrics:", "Decode batch", "Avg prompt throughput")

PID_RE = re.compile(r"\bpid=(\d+)\)")
TIME_RE = re.compile(r"\b(\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)\b|\b(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)")
ENGINE_RE = re.compile(r"Engine\s+0*(\d+)\s*:\s*Avg prompt throughput")
QUOTE_CHARS = "`\"'“”‘’"
BULLET_RE = re.compile(r"^\s*(?:[-*+>|]|\d+[.)])\s")

# Fast paths for the lines a vLLM 0.32 server prints every stats interval, read by one compiled
# regex instead of field by field (about 3x faster per line). They must give exactly what the
# general path gives (tests/metrics/test_fast_paths.py checks it line by line), so they only take
# what that path reads unambiguously: plain decimals (no sign, exponent or nan), integers short
# enough to survive its float round trip, each field once. Anything else takes the general path.
FAST_PATHS = True
_DEC = r"\d{1,15}(?:\.\d{1,15})?"
_INT = r"\d{1,15}"
FAST_SPEC_RE = re.compile(
    rf" Mean acceptance length: ({_DEC}), Accepted throughput: ({_DEC}) tokens/s, "
    rf"Drafted throughput: ({_DEC}) tokens/s, Accepted: ({_INT}) tokens, Drafted: ({_INT}) tokens, "
    rf"Per-position acceptance rate: ({_DEC}(?:, {_DEC})*), Avg Draft acceptance rate: ({_DEC})%")
FAST_ENGINE_RE = re.compile(
    rf" Avg prompt throughput: ({_DEC}) tokens/s, Avg generation throughput: ({_DEC}) tokens/s, "
    rf"Running: ({_INT}) reqs, Waiting: ({_INT}) reqs((?:, [A-Za-z][A-Za-z ]*: {_DEC}%)*)")

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


def is_candidate(line: str) -> bool:
    # Spelled out rather than any(... for p in PREFILTER): this runs once per metric line of
    # multi-GB logs, and the generator costs more than the three searches.
    return "metrics:" in line or "Avg prompt throughput" in line or "Decode batch" in line


_QUOTE_RE = re.compile(f"[{re.escape(QUOTE_CHARS)}]")


def _is_quoted(prefix: str, body: str) -> bool:
    return "`" in body or _QUOTE_RE.search(prefix) is not None or BULLET_RE.match(prefix) is not None


# vLLM's own prefix, "(APIServer pid=1) INFO 12-02 13:26:42 [metrics.py:120] ": TIME_RE and PID_RE
# find exactly these two groups in it, in about twice the time.
_VLLM_PREFIX_RE = re.compile(r"\(\w+ pid=(\d+)\) [A-Z]+ (\d{2}-\d{2} \d{2}:\d{2}:\d{2}) \[[\w.]+:\d+\] ")


def _prefix_meta(prefix: str) -> tuple[str | None, int | None]:
    if FAST_PATHS:
        fast = _VLLM_PREFIX_RE.fullmatch(prefix)
        if fast is not None:
            return fast.group(2), int(fast.group(1))
    m = TIME_RE.search(prefix)
    time = (m.group(1) or m.group(2)) if m else None
    p = PID_RE.search(prefix)
    return time, (int(p.group(1)) if p else None)


class LineParser:
    """Stateful over one file: remembers each process's last engine id (data-parallel engines)."""

    def __init__(self, file: str | None = None) -> None:
        self.file = file
        self._engine_by_pid: dict[int | None, int] = {}

    def parse_line(self, raw: str, lineno: int) -> Record | None:
        if not is_candidate(raw):
            return None
        line = strip_ansi(raw).rstrip("\r\n")
        for marker in SPEC_MARKERS:
            idx = line.find(marker)
            if idx >= 0:
                return self._spec(line, idx, marker, lineno)
        idx = line.find(SGLANG_MARKER)
        if idx >= 0:
            return self._sglang(line, idx, lineno)
        m = ENGINE_RE.search(line)
        if m:
            return self._engine(line, m, lineno)
        return None

    def _spec(self, line: str, idx: int, marker: str, lineno: int) -> SpecDecodeRecord | None:
        prefix, body = line[:idx], line[idx + len(marker):]
        if _is_quoted(prefix, body):
            return None
        if FAST_PATHS and marker == "SpecDecoding metrics:":
            fast = FAST_SPEC_RE.fullmatch(body)
            if fast is not None:
                return self._fast_spec(fast, prefix, lineno)
        values: dict[str, object] = {}
        names = []
        for name, raw in pairs(body):
            names.append(name)
            spec = SPEC_FIELDS.get(name)
            if spec is None or spec[0] in values:
                continue
            converted = spec[1](raw)
            if converted is not None:
                values[spec[0]] = converted
        if not names or names[0] not in SPEC_FIELDS:
            return None
        if not any(isinstance(v, (int, float, list)) for v in values.values()) and "nan" not in body.lower():
            return None
        fmt, cumulative = _spec_format(marker, names)
        time, pid = _prefix_meta(prefix)
        return SpecDecodeRecord(
            source="vllm", format=fmt, file=self.file, line=lineno, time=time, pid=pid,
            engine=self._engine_by_pid.get(pid), cumulative=cumulative, **values,  # type: ignore[arg-type]
        )

    def _fast_spec(self, m: re.Match[str], prefix: str, lineno: int) -> SpecDecodeRecord:
        mal, acc_tp, dr_tp, acc, drafted, per_pos, dar = m.groups()
        time, pid = _prefix_meta(prefix)
        return SpecDecodeRecord(
            source="vllm", format="vllm-v1-mean-first", file=self.file, line=lineno, time=time, pid=pid,
            engine=self._engine_by_pid.get(pid), cumulative=False, accepted_tokens=int(acc),
            draft_tokens=int(drafted), per_position_acceptance=[float(x) for x in per_pos.split(", ")],
            mean_acceptance_length=float(mal), draft_acceptance_rate=round(float(dar) / 100.0, 12),
            accepted_throughput=float(acc_tp), drafted_throughput=float(dr_tp),
        )

    def _sglang(self, line: str, idx: int, lineno: int) -> SpecDecodeRecord | None:
        prefix, body = line[:idx], line[idx + len(SGLANG_MARKER):].lstrip(". ")
        if _is_quoted(prefix, body):
            return None
        values: dict[str, object] = {}
        seen = False
        for name, raw in pairs(body):
            spec = SGLANG_FIELDS.get(name)
            if spec is None:
                continue
            seen = True
            converted = spec[1](raw)
            if converted is not None and spec[0] not in values:
                values[spec[0]] = converted
        if not seen:
            return None
        time, pid = _prefix_meta(prefix)
        return SpecDecodeRecord(source="sglang", format="sglang-decode-batch", file=self.file, line=lineno,
                                time=time, pid=pid, cumulative=False, **values)  # type: ignore[arg-type]

    def _engine(self, line: str, m: re.Match[str], lineno: int) -> EngineStatsRecord | None:
        prefix = line[: m.start()]
        if _is_quoted(prefix, line[m.end():]):
            return None
        engine = int(m.group(1))
        time, pid = _prefix_meta(prefix)
        self._engine_by_pid[pid] = engine
        rest = line[m.start():].split(":", 1)[1]
        fast = FAST_ENGINE_RE.fullmatch(rest) if FAST_PATHS else None
        if fast is not None:
            prompt, generation, running, waiting, tail = fast.groups()
            low = tail.lower()
            # A repeated name would override the first value in the general path's dict.
            if "throughput" not in low and "running" not in low and "waiting" not in low:
                return EngineStatsRecord(
                    source="vllm", format="vllm-engine-stats", file=self.file, line=lineno, time=time,
                    pid=pid, engine=engine, prompt_throughput=float(prompt),
                    generation_throughput=float(generation), running_reqs=int(running), waiting_reqs=int(waiting))
        vals = dict(pairs(rest))
        return EngineStatsRecord(
            source="vllm", format="vllm-engine-stats", file=self.file, line=lineno, time=time, pid=pid,
            engine=engine,
            prompt_throughput=number(vals.get("avg prompt throughput", "")),
            generation_throughput=number(vals.get("avg generation throughput", "")),
            running_reqs=integer(vals.get("running", "")),
            waiting_reqs=integer(vals.get("waiting", "")),
        )


def _spec_format(marker: str, names: list[str]) -> tuple[str, bool]:
    if marker.startswith("Speculative"):
        if "system efficiency" in names or "number of speculative tokens" in names or any(
            n.startswith("number of emitted") for n in names
        ):
            return "vllm-v0", True
        return "vllm-v1-early", False
    if names and names[0] == "mean acceptance length":
        return "vllm-v1-mean-first", False
    return "vllm-v1-rate-first", False

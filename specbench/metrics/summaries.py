"""Printed summaries spanning several lines → canonical records.

- ``vllm-bench-serve``: the ``-----Speculative Decoding-----`` block of ``vllm bench serve``
  (``Acceptance rate (%):``, ``Acceptance length:``, ``Drafts:``, ``Draft tokens:``, ``Accepted tokens:``,
  ``Per-position acceptance (%):`` then ``Position i:`` lines), over the whole benchmark.
- ``vllm-offline``: the summary of vLLM's ``examples/offline_inference/spec_decode.py``
  (``num_drafts:``, ``num_draft_tokens:``, ``num_accepted_tokens:``, ``mean acceptance length:``,
  ``acceptance at token i:``), over the whole offline run.
"""

from __future__ import annotations

import re

from specbench.metrics.fields import fraction, integer, number, strip_ansi
from specbench.metrics.record import SpecDecodeRecord

BENCH_HEADER_RE = re.compile(r"-{3,}\s*Speculative Decoding\s*-{3,}")
LABEL_RE = re.compile(r"^\s*(?P<label>[A-Za-z][A-Za-z0-9 _()%/\-]*?)\s*:\s*(?P<value>\S.*?)?\s*$")
OFFLINE_KEYS = {"total_num_output_tokens", "num_drafts", "num_draft_tokens", "num_accepted_tokens",
                "mean acceptance length"}
OFFLINE_POS_RE = re.compile(r"^\s*acceptance at token (\d+)\s*:\s*(\S+)")
PREFILTER = ("Speculative Decoding", "num_drafts", "mean acceptance length", "total_num_output_tokens")


class SummaryParser:
    """Feed every line; complete blocks come back as records."""

    def __init__(self, file: str | None = None) -> None:
        self.file = file
        self._kind: str | None = None
        self._start = 0
        self._values: dict[str, object] = {}
        self._positions: dict[int, float] = {}

    @property
    def open(self) -> bool:
        return self._kind is not None

    def feed(self, raw: str, lineno: int) -> SpecDecodeRecord | None:
        if self._kind is None and not any(p in raw for p in PREFILTER):
            return None
        line = strip_ansi(raw).rstrip("\r\n")
        if self._kind == "bench":
            if self._bench_line(line):
                return None
            return self.close()
        if self._kind == "offline":
            if self._offline_line(line):
                return None
            return self.close()
        if BENCH_HEADER_RE.search(line):
            self._begin("bench", lineno)
            return None
        m = LABEL_RE.match(line)
        if m and m.group("label").strip().lower() in OFFLINE_KEYS:
            self._begin("offline", lineno)
            self._offline_line(line)
        return None

    def close(self) -> SpecDecodeRecord | None:
        kind, values, positions = self._kind, self._values, self._positions
        self._kind, self._values, self._positions = None, {}, {}
        if kind is None or not (values or positions):
            return None
        if positions and sorted(positions) == list(range(len(positions))):
            values["per_position_acceptance"] = [positions[i] for i in range(len(positions))]
        source = "vllm-bench-serve" if kind == "bench" else "vllm-offline"
        return SpecDecodeRecord(source=source, format=source, file=self.file, line=self._start,
                                cumulative=True, **values)  # type: ignore[arg-type]

    def _begin(self, kind: str, lineno: int) -> None:
        self._kind, self._start, self._values, self._positions = kind, lineno, {}, {}

    def _bench_line(self, line: str) -> bool:
        if line.strip().startswith("=") or not line.strip():
            return False
        m = LABEL_RE.match(line)
        if not m:
            return False
        label, raw = m.group("label").strip().lower(), (m.group("value") or "")
        pos = re.fullmatch(r"position (\d+)", label)
        if pos:
            value = number(raw)
            if value is not None:
                self._positions[int(pos.group(1))] = round(value / 100.0, 12)
            return True
        field = {
            "acceptance rate (%)": ("draft_acceptance_rate", lambda r: None if number(r) is None else round(number(r) / 100.0, 12)),
            "acceptance length": ("mean_acceptance_length", number),
            "drafts": ("num_drafts", integer),
            "draft tokens": ("draft_tokens", integer),
            "accepted tokens": ("accepted_tokens", integer),
            "per-position acceptance (%)": (None, None),
        }.get(label)
        if field is None:
            return False
        if field[0] is not None:
            value = field[1](raw)
            if value is not None:
                self._values[field[0]] = value
        return True

    def _offline_line(self, line: str) -> bool:
        if re.fullmatch(r"\s*-{3,}\s*", line):
            return True
        pos = OFFLINE_POS_RE.match(line)
        if pos:
            value = fraction(pos.group(2))
            if value is not None:
                self._positions[int(pos.group(1))] = value
            return True
        m = LABEL_RE.match(line)
        if not m:
            return False
        label, raw = m.group("label").strip().lower(), (m.group("value") or "")
        field = {
            "total_num_output_tokens": ("emitted_tokens", integer),
            "num_drafts": ("num_drafts", integer),
            "num_draft_tokens": ("draft_tokens", integer),
            "num_accepted_tokens": ("accepted_tokens", integer),
            "mean acceptance length": ("mean_acceptance_length", number),
        }.get(label)
        if field is None:
            return False
        value = field[1](raw)
        if value is not None:
            self._values[field[0]] = value
        return True

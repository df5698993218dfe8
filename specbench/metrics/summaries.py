"""Printed summaries spanning several lines → canonical records.

- ``vllm-bench-serve``: the ``-----Speculative Decoding-----`` block of ``vllm bench serve``
  (``Acceptance rate (%):``, ``Acceptance length:``, ``Drafts:``, ``Draft tokens:``, ``Accepted tokens:``,
  ``Per-position acceptance (%):`` then ``Position i:`` lines), over the whole benchmark.
- ``vllm-offline``: the summary of vLLM's ``examples/offline_inference/spec_decode.py``
  (``num_drafts:``, ``num_draft_tokens:``, ``num_accepted_tokens:``, ``mean acceptance length:``,
  ``acceptance at token i:``), over the whole offline run.

Blocks pasted into Markdown read too: each line may stand behind a bullet, a quote mark, a table
pipe or backticks; a line "..." (or a value "...") elided by the author leaves what it hides
unknown (an elided per-position line drops the per-position list, never shortens it). Lines are
split at their first colon, never by a backtracking regex: a hostile line stays linear.

The offline block as pasted: its ``---`` separators, up to :data:`MAX_GAP` blank or code-fence
lines in a row (a paste that puts the counts and the "acceptance at token i" lines in two fences,
or blank lines between them) stay inside the block, and the "acceptance at token i" lines alone
(pasted without the counts above them) are a block of their own. A field or position the open block
already holds, or a count after its per-position lines, starts the next block: two runs printed one
after the other are two records.

One run is one record, counts and per-position values together (issue 43, item 7): a block that has
its counts but no per-position line yet stays open across up to :data:`MAX_INTERRUPTION` other lines
(a log line the server wrote to stderr between the script's prints, a sentence in a paste), which
the log parser still reads; and the whole summary pasted on one line (as an issue thread shows it
outside a code fence) is read piece by piece, split before each of the script's labels.
"""

from __future__ import annotations

import re
from typing import Any

from specbench.metrics.fields import fraction, integer, number, strip_ansi
from specbench.metrics.record import SpecDecodeRecord
from specbench.records.counts import MAX_POSITIONS

BENCH_HEADER_RE = re.compile(r"-{3,}\s*Speculative Decoding\s*-{3,}")
LABEL_CHARS_RE = re.compile(r"[A-Za-z][A-Za-z0-9 _()%/\-]*")
# Paste decoration before a line: blanks, quote marks, table pipes, backticks, a list bullet.
DECOR_RE = re.compile(r"[ \t>|`]*(?:[-*+][ \t]+)?")
ELIDED = ("...", "\u2026")
OFFLINE_KEYS = {
    "total_num_output_tokens",
    "num_drafts",
    "num_draft_tokens",
    "num_accepted_tokens",
    "mean acceptance length",
}
OFFLINE_POS_RE = re.compile(r"acceptance at token (\d{1,9})\s*:\s*(\S+)")
OFFLINE_SEPARATOR_RE = re.compile(r"-{3,}")
# A Markdown code fence (after the quote marks and indent of a paste), with its info string.
FENCE_RE = re.compile(r"[ \t>]*(?:`{3,}|~{3,})[^`]*")
# Blank or fence lines in a row an offline block keeps open across (separators do not count).
MAX_GAP = 3
# Lines of any kind after an offline block's counts that may stand before its first per-position
# line (the script prints the counts first): the per-position lines after them belong to that run.
MAX_INTERRUPTION = 8
# Where a summary pasted on one line is split: before each of the script's labels and separators.
ONE_LINE_SPLIT_RE = re.compile(
    r"-{3,}|(?:total_num_output_tokens|num_drafts|num_draft_tokens|num_accepted_tokens"
    r"|mean acceptance length|acceptance at token \d{1,9})[ \t]*:"
)
# What starts a block. "acceptance at token" costs the chunked scan one more pass over every byte
# (benchmarks/parse_throughput.py, sparse log: 8.1x grep's CPU time before, 8.9x after; the target
# is <= 10x), so that the per-position lines pasted alone are read too.
PREFILTER = (
    "Speculative Decoding",
    "num_drafts",
    "mean acceptance length",
    "total_num_output_tokens",
    "acceptance at token",
)


def _label(line: str) -> tuple[str, str] | None:
    """``(lower-cased label, value)`` of a ``Label: value`` line, or None."""
    label, sep, value = line.partition(":")
    label = label.strip()
    if not sep or LABEL_CHARS_RE.fullmatch(label) is None:
        return None
    return label.lower(), value.strip()


def _clean(line: str) -> str:
    line = line[DECOR_RE.match(line).end() :]  # type: ignore[union-attr]
    return line.rstrip().rstrip("|`").rstrip()


def _fraction(raw: str) -> float | None:
    """A printed percentage as a fraction (58.4 -> 0.584), rounded as the log parser does."""
    value = number(raw)
    return None if value is None else round(value / 100.0, 12)


class SummaryParser:
    """Feed every line; complete blocks come back as records. After each :meth:`feed`, ``took``
    says whether the line belonged to a block (a line that did not is the log parser's to read)."""

    def __init__(self, file: str | None = None, warn=None) -> None:
        self.file = file
        self._warn = warn
        self._kind: str | None = None
        self._start = 0
        self._values: dict[str, Any] = {}  # field -> parsed value, splatted into the record
        self._positions: dict[int, float] = {}
        self._positions_unknown = False  # elided or over the cap
        self._gap = 0  # blank or fence lines since the offline block's last line
        self._last = 0  # the offline block's last line
        self.took = False

    @property
    def open(self) -> bool:
        return self._kind is not None

    def feed(self, raw: str, lineno: int) -> tuple[SpecDecodeRecord, ...]:
        """The records ``raw`` completes (a line holding a whole summary may complete more than one)."""
        if self._kind is None and not any(p in raw for p in PREFILTER):
            self.took = False
            return ()
        plain = strip_ansi(raw).rstrip("\r\n")
        pieces = _one_line_pieces(plain)
        if pieces is None:
            rec = self._feed(plain, lineno)
            return () if rec is None else (rec,)
        out = []
        for piece in pieces:
            rec = self._feed(piece, lineno)
            if rec is not None:
                out.append(rec)
        self.took = True
        return tuple(out)

    def _feed(self, plain: str, lineno: int) -> SpecDecodeRecord | None:
        line = _clean(plain)
        self.took = True
        if self._kind == "bench":
            if self._bench_line(line, lineno):
                return None
            self.took = False
            return self.close()
        if self._kind == "offline":
            if self._next_run(line):
                rec = self.close()
                self._start_offline(line, lineno)
                return rec
            if line and not FENCE_RE.fullmatch(plain) and self._offline_line(line, lineno):
                self._gap, self._last = 0, lineno
                return None
            if BENCH_HEADER_RE.search(line):
                rec = self.close()
                self._begin("bench", lineno)
                return rec
            blank = not line or FENCE_RE.fullmatch(plain) is not None
            self.took = blank
            if self._awaits_positions():
                # The counts are printed, their per-position lines may still come: this run's.
                if lineno - self._last <= MAX_INTERRUPTION:
                    return None
            elif blank:
                self._gap += 1
                if self._gap <= MAX_GAP:
                    return None
            return self.close()
        if BENCH_HEADER_RE.search(line):
            self._begin("bench", lineno)
            return None
        self._start_offline(line, lineno)
        self.took = self._kind is not None
        return None

    def _awaits_positions(self) -> bool:
        return bool(self._values) and not self._positions and not self._positions_unknown

    def _start_offline(self, line: str, lineno: int) -> None:
        parts = _label(line)
        # A single value: "Mean acceptance length: 2.70, Accepted ..." is a vLLM line, not this block.
        if (parts and parts[0] in OFFLINE_KEYS and "," not in parts[1]) or OFFLINE_POS_RE.match(line):
            self._begin("offline", lineno)
            self._offline_line(line, lineno)

    def _next_run(self, line: str) -> bool:
        """Whether ``line`` starts the next run's block: a field or a position the open offline block
        already has, or a count after its per-position lines (the script prints the counts first)."""
        pos = OFFLINE_POS_RE.match(line)
        if pos:
            return int(pos.group(1)) in self._positions
        parts = _label(line)
        field = _OFFLINE_FIELDS.get(parts[0]) if parts else None
        return field is not None and (field[0] in self._values or bool(self._positions))

    def close(self) -> SpecDecodeRecord | None:
        kind, values, positions = self._kind, self._values, self._positions
        self._kind, self._values, self._positions = None, {}, {}
        if kind is None or not (values or positions):
            return None
        if positions and not self._positions_unknown and sorted(positions) == list(range(len(positions))):
            values["per_position_acceptance"] = [positions[i] for i in range(len(positions))]
        if not values:  # per-position lines only, and not the whole list: nothing known
            return None
        source = "vllm-bench-serve" if kind == "bench" else "vllm-offline"
        return SpecDecodeRecord(
            source=source, format=source, file=self.file, line=self._start, cumulative=True, **values
        )

    def _position(self, index: int, value: float | None, lineno: int) -> None:
        if index >= MAX_POSITIONS:
            if not self._positions_unknown and self._warn is not None:
                self._warn(
                    lineno,
                    f"position {index} is over the cap of {MAX_POSITIONS} positions: "
                    "per-position values dropped, the block's other fields kept",
                )
            self._positions_unknown = True
        elif value is None:
            self._positions_unknown = True  # elided or unreadable: the list is not known whole
        else:
            self._positions[index] = value

    def _begin(self, kind: str, lineno: int) -> None:
        self._kind, self._start, self._values, self._positions = kind, lineno, {}, {}
        self._positions_unknown, self._gap, self._last = False, 0, lineno

    def _bench_line(self, line: str, lineno: int) -> bool:
        if line.startswith("=") or not line:
            return False
        if line in ELIDED:
            self._positions_unknown = True
            return True
        parts = _label(line)
        if parts is None:
            return False
        label, raw = parts
        pos = re.fullmatch(r"position (\d{1,9})", label)
        if pos:
            value = number(raw)
            self._position(int(pos.group(1)), None if value is None else round(value / 100.0, 12), lineno)
            return True
        field = {
            "acceptance rate (%)": ("draft_acceptance_rate", _fraction),
            "acceptance length": ("mean_acceptance_length", number),
            "drafts": ("num_drafts", integer),
            "draft tokens": ("draft_tokens", integer),
            "accepted tokens": ("accepted_tokens", integer),
            "per-position acceptance (%)": (None, None),
        }.get(label)
        if field is None:
            return False
        if field[0] is not None and field[1] is not None:
            value = field[1](raw)
            if value is not None:
                self._values[field[0]] = value
        return True

    def _offline_line(self, line: str, lineno: int) -> bool:
        if OFFLINE_SEPARATOR_RE.fullmatch(line):
            return True
        if line in ELIDED:
            self._positions_unknown = True
            return True
        pos = OFFLINE_POS_RE.match(line)
        if pos:
            self._position(int(pos.group(1)), fraction(pos.group(2)), lineno)
            return True
        parts = _label(line)
        if parts is None:
            return False
        label, raw = parts
        field = _OFFLINE_FIELDS.get(label)
        if field is None:
            return False
        value = field[1](raw)
        if value is not None:
            self._values[field[0]] = value
        return True


def _one_line_pieces(plain: str) -> list[str] | None:
    """A summary pasted on one line, cut before each label and separator; None for any other line
    (a vLLM stats line has commas between its fields, the script's summary none)."""
    if plain.count(":") < 2 or "," in plain:
        return None
    starts = [m.start() for m in ONE_LINE_SPLIT_RE.finditer(plain)]
    if sum(plain[i] != "-" for i in starts) < 2:
        return None
    return [plain[a:b] for a, b in zip([0, *starts], [*starts, len(plain)]) if plain[a:b].strip()]


_OFFLINE_FIELDS = {
    "total_num_output_tokens": ("emitted_tokens", integer),
    "num_drafts": ("num_drafts", integer),
    "num_draft_tokens": ("draft_tokens", integer),
    "num_accepted_tokens": ("accepted_tokens", integer),
    "mean acceptance length": ("mean_acceptance_length", number),
}

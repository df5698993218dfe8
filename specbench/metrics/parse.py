"""Entry points: text or files of any supported kind → canonical records.

A ``vllm bench serve`` result file (JSON) is read by :mod:`specbench.metrics.vllm_bench`. Any
other file is read as Prometheus exposition text when it looks like one, else line by line as a log
(vLLM/SGLang lines and multi-line printed summaries). Logs are streamed, so a multi-GB log is parsed
in bounded memory; non-UTF-8 bytes are replaced and counted.
"""

from __future__ import annotations

import gc
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from specbench.errors import InputError
from specbench.metrics import vllm_bench
from specbench.metrics.logs import PREFILTER, LineParser
from specbench.metrics.prometheus import looks_like_prometheus, parse_prometheus
from specbench.metrics.record import Record
from specbench.metrics.summaries import PREFILTER as SUMMARY_PREFILTER
from specbench.metrics.summaries import SummaryParser

__all__ = ["ParseResult", "parse_file", "parse_lines", "parse_prometheus", "parse_text"]


@dataclass
class ParseResult:
    records: list[Record]
    warnings: list[str] = field(default_factory=list)
    replaced_chars: int = 0


def parse_lines(lines: Iterable[str], file: str | None = None) -> Iterator[Record]:
    """Records from log lines, in order; line numbers are 1-based."""
    return _parse_lines_from(lines, 0, LineParser(file), file)


def parse_text(text: str, file: str | None = None) -> list[Record]:
    if looks_like_prometheus(text):
        return list(parse_prometheus(text, file=file))
    return list(parse_lines(text.splitlines(), file=file))


def parse_file(path: Path | str) -> ParseResult:
    """Parse one file; unreadable → InputError naming it; no records → a warning naming it."""
    path = Path(path)
    name = str(path)
    if path.is_dir():
        raise InputError(f"{name}: is a directory; give log or /metrics files (or a run directory to 'report')")
    try:
        fh = os.fdopen(os.dup(0), "rb") if name == "-" else open(path, "rb")  # "-": standard input
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror or exc}); check the path") from None
    with fh:
        if not fh.seekable():  # a pipe (`parse -`, /dev/stdin): read it once, parse it from memory
            fh = io.BytesIO(fh.read())
        head = fh.read(4096)
        fh.seek(0)
        if vllm_bench.sniff(head.decode("utf-8", "replace")):  # a `vllm bench serve --save-result` file
            records, warnings = vllm_bench.records_from_file(path)
            return ParseResult(records=list(records), warnings=warnings)
        counter = _ReplacementCounter()
        if looks_like_prometheus(head.decode("utf-8", "replace")):
            text = counter.decode(fh.read())
            records: list[Record] = list(parse_prometheus(text, file=name))
        else:
            records = without_gc(lambda: list(_scan_log(fh, counter, name)))
    warnings = []
    if counter.replaced:
        warnings.append(f"{name}: {counter.replaced} invalid UTF-8 byte sequence(s) replaced")
    if not any(r.kind == "spec_decode" for r in records):
        warnings.append(f"{name}: no speculative-decoding metrics found")
    return ParseResult(records=records, warnings=warnings, replaced_chars=counter.replaced)


# 1 MiB: each chunk is searched once per marker, so a chunk that stays in the CPU's cache between
# passes helps, and a chunk holding a printed summary (read line by line) stays small; per-chunk
# Python work is negligible at this size.
CHUNK_BYTES = 1024 * 1024
_HIT_MARKERS = tuple(m.encode() for m in PREFILTER)
# The summary markers with an underscore are looked for only where one is: memchr finds "_" at
# memory speed, and a server's log under traffic (access lines, stats lines) has none.
_SUMMARY_PLAIN = tuple(m.encode() for m in SUMMARY_PREFILTER if "_" not in m)
_SUMMARY_UNDERSCORE = tuple(m.encode() for m in SUMMARY_PREFILTER if "_" in m)


def _has_summary_marker(buf: bytes) -> bool:
    if any(m in buf for m in _SUMMARY_PLAIN):
        return True
    return b"_" in buf and any(m in buf for m in _SUMMARY_UNDERSCORE)


def _scan_log(fh, counter: "_ReplacementCounter", name: str) -> Iterator[Record]:
    """Stream a log in chunks; only lines holding a marker reach Python-level parsing.

    Everything else is touched only by C-speed byte scans: one ``bytes.find`` pass per marker,
    and one ``bytes.count`` pass for the newlines, which give exact line numbers (counted from
    one hit to the next, then to the chunk's end). A chunk ends at its last newline; the next
    read starts there (a seek, not a copy). A chunk that holds a multi-line printed summary is
    parsed line by line instead, so block state stays exact; the summary parser lives across
    chunks, so a block cut by a chunk boundary is still whole.
    """
    line_parser = LineParser(name)
    summary = SummaryParser(name)
    lineno = 0  # lines before the current chunk
    offset, size = 0, CHUNK_BYTES
    while True:
        fh.seek(offset)
        buf = fh.read(size)
        if not buf:
            rec = summary.close()
            if rec is not None:
                yield rec
            return
        if len(buf) == size:  # more may follow: stop at the last whole line
            cut = buf.rfind(b"\n") + 1
            if cut == 0:  # one line longer than the chunk: read more of it at once
                size *= 2
                continue
            size = CHUNK_BYTES
        else:
            cut = len(buf)
        offset += cut
        if not buf.isascii():  # pure ASCII (the common case) has nothing to replace
            counter.count(buf[:cut])
        # Searching all of buf (its last partial line is searched again with the next chunk) saves
        # a copy; a marker found only there just sends this chunk down the slower, exact path.
        if summary.open or _has_summary_marker(buf):
            # Split on \n only, as the hit path below counts lines: a lone \r (tqdm progress bars
            # in vLLM logs) is not a line end, and splitlines() would shift every later line number.
            lines = [line.decode("utf-8", "replace") for line in buf[:cut].split(b"\n")]
            if lines and lines[-1] == "":
                lines.pop()  # the chunk ends with \n
            yield from _parse_lines_from(lines, lineno, line_parser, name, summary)
            lineno += len(lines)
            continue
        starts = set()
        for marker in _HIT_MARKERS:
            pos = buf.find(marker, 0, cut)
            while pos >= 0:
                starts.add(buf.rfind(b"\n", 0, pos) + 1)
                # The rest of this line is a candidate already: search on from the next line.
                nxt = buf.find(b"\n", pos, cut)
                if nxt < 0:
                    break
                pos = buf.find(marker, nxt + 1, cut)
        prev_start, prev_line = 0, lineno
        for start in sorted(starts):
            end = buf.find(b"\n", start, cut)
            end = cut if end < 0 else end
            prev_line += buf.count(b"\n", prev_start, start)
            prev_start = start
            rec = line_parser.parse_line(buf[start:end].decode("utf-8", "replace"), prev_line + 1)
            if rec is not None:
                yield rec
        lineno = prev_line + buf.count(b"\n", prev_start, cut) + (buf[cut - 1] != 10)


def without_gc(build):
    """``build()`` with the cyclic garbage collector paused: records hold no reference cycles, yet
    each of the collector's full passes walks every record built so far (~25% of the time on a
    log with a million windows)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return build()
    finally:
        if was_enabled:
            gc.enable()


def _parse_lines_from(lines: Iterable[str], offset: int, line_parser: LineParser, name: str | None,
                      summary: SummaryParser | None = None) -> Iterator[Record]:
    """Records from ``lines``; a ``summary`` parser passed in is left open for the caller to close."""
    own = summary is None
    summary = summary if summary is not None else SummaryParser(name)
    for i, line in enumerate(lines, offset + 1):
        rec = summary.feed(line, i)
        if rec is not None:
            yield rec
        if summary.open:
            continue
        rec = line_parser.parse_line(line, i)
        if rec is not None:
            yield rec
    if own:
        rec = summary.close()
        if rec is not None:
            yield rec


class _ReplacementCounter:
    def __init__(self) -> None:
        self.replaced = 0

    def decode(self, data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", "replace")
            self.replaced += text.count("\ufffd") - data.decode("utf-8", "ignore").count("\ufffd")
            return text

    def count(self, data: bytes) -> None:
        self.decode(data)

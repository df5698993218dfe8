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
from typing import IO, Any, Callable, Generator, Iterable, Iterator

from specbench.errors import InputError
from specbench.io import open_input
from specbench.metrics import bulk, logs, paste, vllm_bench
from specbench.metrics.logs import FIELD_NAMES, MAX_LINE_CHARS, PREFILTER, LineParser, is_candidate
from specbench.metrics.prometheus import looks_like_prometheus, parse_prometheus
from specbench.metrics.record import Record
from specbench.metrics.record_json import json_line
from specbench.metrics.summaries import PREFILTER as SUMMARY_PREFILTER
from specbench.metrics.summaries import SummaryParser
from specbench.redact import redact_message

__all__ = ["ParseResult", "no_spec_data", "parse_file", "parse_lines", "parse_prometheus", "parse_text"]


@dataclass
class ParseResult:
    records: list[Any]  # Record, or its JSON line (str) from parse_file(as_json=True)
    warnings: list[str] = field(default_factory=list)
    replaced_chars: int = 0


def no_spec_data(paths: Iterable[Path | str]) -> InputError:
    """The error for inputs none of which holds speculative-decoding metrics: ``parse`` and
    ``report`` give it (exit 2) rather than an empty table with exit 0, which reads as a result."""
    names = [str(p) for p in paths]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return InputError(
        f"no SpecDecoding data in {shown}: give a vLLM server log with 'SpecDecoding metrics:' lines "
        "(stats logging on), a /metrics scrape, a printed spec-decode summary or a `vllm bench serve` result"
    )


def parse_lines(lines: Iterable[str], file: str | None = None) -> Iterator[Record]:
    """Records from log lines, in order; line numbers are 1-based."""
    return _parse_lines_from(lines, 0, LineParser(file), file)


def parse_text(text: str, file: str | None = None) -> list[Record]:
    if looks_like_prometheus(text):
        return list(parse_prometheus(text, file=file))
    return list(parse_lines(text.splitlines(), file=file))


def parse_file(
    path: Path | str, each: Callable[[Record], None] | None = None, engine_stats: bool = True, as_json: bool = False
) -> ParseResult:
    """Parse one file; unreadable → InputError naming it; no records → a warning naming it; lines
    and records over the parser's caps → a warning naming file:line each (the first 20).

    With ``each``, every record is handed to it as soon as it is read and none is kept (``records``
    comes back empty): a consumer that keeps less than the records (``report``'s window counts)
    then never holds a long log's records at once. ``engine_stats=False``: leave out Engine
    throughput records (still read: they give their engine ids to the spec records), which a dense
    log's reader then need not build. ``as_json``: ``records`` holds each record's JSON line instead
    (record_json.json_line's text; a dense log's reader writes them without building the records)."""
    path = Path(path)
    spec_seen = False

    def keep(records: Iterable) -> list:
        nonlocal spec_seen
        if not engine_stats:
            records = (r for r in records if type(r) is str or r.kind != "engine_stats")
        out = []
        for rec in records:
            spec_seen = spec_seen or (rec.startswith(SPEC_JSON_HEAD) if type(rec) is str else rec.kind == "spec_decode")
            if as_json and type(rec) is not str:
                rec = json_line(rec)
            if each is None:
                out.append(rec)
            else:
                each(rec)
        return out

    name = redact_message(str(path))  # the records' file: a credential in the path given never reaches them
    fh = _open_log(path, name)
    with fh:
        try:
            if not fh.seekable():  # a pipe (`parse -`, /dev/stdin): read it once, parse it from memory
                fh = io.BytesIO(fh.read())
            head = fh.read(4096)
            fh.seek(0)
            src = _line_source(fh, head)
            if vllm_bench.sniff(head.decode("utf-8", "replace")):  # a `vllm bench serve --save-result` file
                bench_records, bench_warnings = vllm_bench.records_from_file(path)
                return ParseResult(records=keep(bench_records), warnings=bench_warnings)
            counter = _ReplacementCounter()
            line_parser = LineParser(name)
            if looks_like_prometheus(head.decode("utf-8", "replace")):
                text = counter.decode(src.read())
                records: list[Any] = keep(parse_prometheus(text, file=name))
            else:
                records = without_gc(lambda: keep(_scan_log(src, counter, name, line_parser, engine_stats, as_json)))
        except OSError as exc:  # a read that fails mid-file (/proc/self/mem: EIO) names the input
            if exc.filename is not None:
                raise
            raise InputError(f"{name}: cannot read log ({exc.strerror or exc}); give a log or /metrics file") from None
    warnings = line_parser.all_warnings()
    if counter.replaced:
        warnings.append(f"{name}: {counter.replaced} invalid UTF-8 byte sequence(s) replaced")
    if not spec_seen:
        warnings.append(f"{name}: no speculative-decoding metrics found")
    return ParseResult(records=records, warnings=warnings, replaced_chars=counter.replaced)


def _open_log(path: Path, name: str) -> IO[bytes]:
    if path.is_dir():
        raise InputError(f"{name}: is a directory; give log or /metrics files (or a run directory to 'report')")
    if name in STDIN_NAMES:  # standard input (a pipe, read once by parse_file)
        try:
            return os.fdopen(os.dup(0), "rb")
        except OSError as exc:
            raise InputError(f"{name}: cannot read ({exc.strerror or exc}); check the path") from None
    # A regular file only: a FIFO or device is refused by its kind, never opened to block.
    return open_input(path, "log", fix="check the path and its permissions")[0]


def _line_source(fh: IO[bytes], head: bytes) -> IO[bytes] | _CarriageReturns:
    """``fh`` as the log scan reads it, rewound: a CR-only file (classic Mac line ends) is read with
    its lines ending at \\r."""
    src: IO[bytes] | _CarriageReturns = fh
    if b"\r" in head and b"\n" not in head and b"\n" not in fh.read(CHUNK_BYTES):
        src = _CarriageReturns(fh)
    fh.seek(0)
    return src


# How standard input is named on the command line: read as the pipe it is (any other FIFO is refused).
STDIN_NAMES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
# 1 MiB: each chunk is searched once per marker, so a chunk that stays in the CPU's cache between
# passes helps, and a chunk holding a printed summary (read line by line) stays small; per-chunk
# Python work is negligible at this size.
CHUNK_BYTES = 1024 * 1024
_HIT_MARKERS = tuple(m.encode() for m in PREFILTER)
# The summary markers with an underscore are looked for only where one is: memchr finds "_" at
# memory speed, and a server's log under traffic (access lines, stats lines) has none.
_SUMMARY_PLAIN = tuple(m.encode() for m in SUMMARY_PREFILTER if "_" not in m)
_SUMMARY_UNDERSCORE = tuple(m.encode() for m in SUMMARY_PREFILTER if "_" in m)
# Candidate lines in a chunk from which the next chunk is first offered to bulk.read_chunk. Below
# this (a server's log with a 10 s stats interval holds ~150 per MiB) the hit-by-hit path is as
# quick, and the bulk reader's own passes (its regex and a count per marker) would add to a scan
# that is otherwise grep's.
BULK_MIN_HITS = 400
SPEC_JSON_HEAD = '{"kind": "spec_decode"'  # how a spec record's JSON line starts (record_json's key order)


def _has_summary_marker(buf: bytes) -> bool:
    if any(m in buf for m in _SUMMARY_PLAIN):
        return True
    return b"_" in buf and any(m in buf for m in _SUMMARY_UNDERSCORE)


def _scan_log(
    fh,
    counter: "_ReplacementCounter",
    name: str,
    line_parser: LineParser,
    engine_stats: bool = True,
    as_json: bool = False,
) -> Iterator[Record | str]:
    """Stream a log in chunks (:func:`_chunks`); only lines holding a marker reach Python-level parsing.

    Everything else is touched only by C-speed byte scans: one ``bytes.find`` pass per marker,
    and one ``bytes.count`` pass for the newlines, which give exact line numbers (counted from
    one hit to the next, then to the chunk's end). A chunk that holds a multi-line printed summary
    is parsed line by line instead, so block state stays exact; the summary parser lives across
    chunks, so a block cut by a chunk boundary is still whole. After a chunk with BULK_MIN_HITS
    candidate lines, the next is first offered whole to :func:`bulk.read_chunk` (one regex over the
    chunk), which takes it only when all its candidate lines are vLLM 0.32 stats lines.
    """
    summary = SummaryParser(name, warn=line_parser.warn)
    lineno = 0  # lines before the current chunk
    dense = False  # the previous chunk had BULK_MIN_HITS candidate lines
    rec: Record | None
    for buf, cut in _chunks(fh, counter):
        # Searching all of buf (its last partial line is searched again with the next chunk) saves
        # a copy; a marker found only there just sends this chunk down the slower, exact path.
        if cut is None or summary.open or _has_summary_marker(buf):
            lineno = yield from _parse_chunk_lines(buf, cut, lineno, line_parser, name, summary)
            continue
        if dense and logs.FAST_PATHS:
            got = bulk.read_chunk(buf, cut, lineno, name, line_parser.engine_by_pid, engine_stats, as_json)
            if got is not None:
                records, lineno = got
                yield from records
                continue
        starts = _hit_starts(buf, cut)
        dense = len(starts) >= BULK_MIN_HITS
        prev_start, prev_line, consumed = 0, lineno, 0
        for start in starts:
            if start < consumed:  # a line already read as part of a wrapped record
                continue
            end = buf.find(b"\n", start, cut)
            end = cut if end < 0 else end
            prev_line += buf.count(b"\n", prev_start, start)
            prev_start = start
            if end - start > MAX_LINE_BYTES:
                raw = buf[start : start + MAX_LINE_BYTES].decode("utf-8", "replace")
                rec = _parse_cut_line(raw, prev_line + 1, line_parser)
            else:
                text = buf[start:end].decode("utf-8", "replace")
                if not is_candidate(text):  # as the line-by-line path: only a candidate takes more lines
                    continue
                text, consumed = _wrapped(buf, text, end, cut)
                rec = line_parser.parse_line(text, prev_line + 1)
            if rec is not None:
                yield rec
        lineno = prev_line + buf.count(b"\n", prev_start, cut) + (buf[cut - 1] != 10)
    rec = summary.close()
    if rec is not None:
        yield rec


def _chunks(fh, counter: "_ReplacementCounter") -> Iterator[tuple[bytes, int | None]]:
    """The log as ``(buf, cut)`` chunks, each of whole lines ``buf[:cut]``, its invalid UTF-8 counted.

    A chunk ends at its last newline; the next read starts there (a seek, not a copy). A chunk
    never ends inside a record wrapped by hand over several lines (:func:`_safe_cut`). A line
    longer than a chunk and the line cap is read up to the cap and skipped to its end at C speed,
    so memory stays bounded: it comes as ``(its first MAX_LINE_BYTES bytes, None)``.
    """
    offset, size = 0, CHUNK_BYTES
    while True:
        fh.seek(offset)
        buf = fh.read(size)
        if not buf:
            return
        if len(buf) == size:  # more may follow: stop at the last whole line
            cut = buf.rfind(b"\n") + 1
            if cut == 0 and size <= MAX_LINE_BYTES:  # one line longer than the chunk: read more of it
                size *= 2
                continue
            if cut == 0:  # longer than the cap too: its start only, then skip to its end
                offset = _line_end(fh, offset + len(buf))
                head = buf[:MAX_LINE_BYTES]
                if not head.isascii():
                    counter.count(head)
                yield head, None
                size = CHUNK_BYTES
                continue
            safe = _safe_cut(buf, cut)
            if safe == 0 and size < 8 * max(CHUNK_BYTES, MAX_LINE_BYTES):  # a wrapped record may run on
                size *= 2
                continue
            cut, size = safe or cut, CHUNK_BYTES
        else:
            cut = len(buf)
        offset += cut
        if not buf.isascii():  # pure ASCII (the common case) has nothing to replace
            counter.count(buf[:cut])
        yield buf, cut


def _parse_chunk_lines(
    buf: bytes, cut: int | None, lineno: int, line_parser: LineParser, name: str, summary: SummaryParser
) -> Generator[Record, None, int]:
    """The records of ``buf[:cut]`` read line by line (after line ``lineno``); returns the number of
    its last line. ``cut`` None: ``buf`` is the start of one line over the cap (its rest skipped)."""
    if cut is None:
        yield from _parse_lines_from(
            [buf.decode("utf-8", "replace")], lineno, line_parser, name, summary, frozenset([lineno + 1])
        )
        return lineno + 1
    # Split on \n only, as the hit path counts lines: a lone \r (tqdm progress bars in vLLM
    # logs) is not a line end, and splitlines() would shift every later line number.
    lines = [line.decode("utf-8", "replace") for line in buf[:cut].split(b"\n")]
    if lines and lines[-1] == "":
        lines.pop()  # the chunk ends with \n
    yield from _parse_lines_from(lines, lineno, line_parser, name, summary)
    return lineno + len(lines)


def _hit_starts(buf: bytes, cut: int) -> list[int]:
    """The offsets, in order, of the lines of ``buf[:cut]`` that hold a prefilter marker."""
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
    return sorted(starts)


MAX_LINE_BYTES = MAX_LINE_CHARS


def _line_end(fh, pos: int) -> int:
    """Offset just past the newline ending the line that runs on at ``pos`` (or the file's end)."""
    while True:
        fh.seek(pos)
        piece = fh.read(CHUNK_BYTES)
        if not piece:
            return pos
        j = piece.find(b"\n")
        if j >= 0:
            return pos + j + 1
        pos += len(piece)


def _parse_cut_line(raw: str, lineno: int, line_parser: LineParser) -> Record | None:
    if is_candidate(raw):
        line_parser.warn(
            lineno,
            f"line longer than the cap of {MAX_LINE_CHARS} characters: only its start "
            "was read, and a field cut there is dropped",
        )
    return line_parser.parse_line(raw, lineno, cut=True)


def _wrapped(buf: bytes, text: str, end: int, cut: int) -> tuple[str, int]:
    """``text`` joined with the lines after it (from ``end``) that continue it as a hand-wrapped
    record, and the offset past the last line used."""
    pos = end
    for _ in range(paste.MAX_WRAP_LINES):
        # vLLM's own lines start with "(APIServer pid=..." or a level: never a continuation.
        if pos + 1 >= cut or buf[pos + 1] == 40:  # "("
            break
        nend = buf.find(b"\n", pos + 1, cut)
        nend = cut if nend < 0 else nend
        if nend - pos - 1 > MAX_LINE_BYTES:
            break
        more = paste.continuation(text, buf[pos + 1 : nend].decode("utf-8", "replace"), FIELD_NAMES)
        if more is None:
            break
        text, pos = paste.join(text, more), nend
    return text, pos + 1


_MAX_CUT_WALK = 64


def _safe_cut(buf: bytes, cut: int) -> int:
    """A chunk end at or before ``cut`` where no hand-wrapped record spans the boundary: the start of
    a line that cannot continue the one before it. The last whole line always moves to the next
    chunk (its successor there is not whole yet); 0 when the chunk holds no such line (read more);
    a chain of continuation-shaped lines longer than a few dozen is pathological and keeps ``cut``."""
    line_start = buf.rfind(b"\n", 0, cut - 1) + 1
    for _ in range(_MAX_CUT_WALK):
        if line_start == 0:
            return 0
        prev_start = buf.rfind(b"\n", 0, line_start - 1) + 1
        line = buf[line_start : buf.find(b"\n", line_start, cut)]
        if line[:1] == b"(" or not paste.may_continue(
            buf[prev_start : line_start - 1].decode("utf-8", "replace"), line.decode("utf-8", "replace"), FIELD_NAMES
        ):
            return line_start
        line_start = prev_start
    return cut


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


def _parse_lines_from(
    lines: Iterable[str],
    offset: int,
    line_parser: LineParser,
    name: str | None,
    summary: SummaryParser | None = None,
    cut_lines: frozenset[int] = frozenset(),
) -> Iterator[Record]:
    """Records from ``lines``; a ``summary`` parser passed in is left open for the caller to close.
    ``cut_lines``: line numbers already cut at the cap by the caller."""
    own = summary is None
    summary = summary if summary is not None else SummaryParser(name, warn=line_parser.warn)
    it = iter(lines)
    ahead: str | None = None  # a line read to see whether it continued a record, to be read again
    i = offset
    rec: Record | None
    while True:
        if ahead is not None:
            line, ahead = ahead, None
        else:
            got = next(it, None)
            if got is None:
                break
            line = got
        i += 1
        cut = i in cut_lines or len(line) > MAX_LINE_CHARS
        if cut:
            line = line[:MAX_LINE_CHARS]
        yield from summary.feed(line, i)
        if summary.took or not is_candidate(line):
            continue
        if cut:
            rec = _parse_cut_line(line, i, line_parser)
        else:
            first, text = i, line
            for _ in range(paste.MAX_WRAP_LINES):
                nxt = next(it, None)
                if nxt is None:
                    break
                more = paste.continuation(text, nxt, FIELD_NAMES) if len(nxt) <= MAX_LINE_CHARS else None
                if more is None:
                    ahead = nxt
                    break
                text, i = paste.join(text, more), i + 1
            rec = line_parser.parse_line(text, first)
        if rec is not None:
            yield rec
    if own:
        rec = summary.close()
        if rec is not None:
            yield rec


class _CarriageReturns:
    """A file whose lines end with a lone \\r, read as if they ended with \\n: each byte read is
    the file's byte, so offsets and line numbers are those of the file. Only a file with no \\n in
    its first chunk is read so: in a log with \\n line ends a lone \\r (tqdm's progress bars) is
    not a line end."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh

    def read(self, size: int = -1) -> bytes:
        return self._fh.read(size).replace(b"\r", b"\n")

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._fh.seek(offset, whence)


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

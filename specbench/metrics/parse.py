"""Entry points: text or files of any supported kind → canonical records.

A file is read as Prometheus exposition text when it looks like one, else line by line as a log
(vLLM/SGLang lines and multi-line printed summaries). Logs are streamed, so a multi-GB log is parsed
in bounded memory; non-UTF-8 bytes are replaced and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from specbench.errors import InputError
from specbench.metrics.logs import LineParser
from specbench.metrics.prometheus import looks_like_prometheus, parse_prometheus
from specbench.metrics.record import Record
from specbench.metrics.summaries import SummaryParser

__all__ = ["ParseResult", "parse_file", "parse_lines", "parse_prometheus", "parse_text"]


@dataclass
class ParseResult:
    records: list[Record]
    warnings: list[str] = field(default_factory=list)
    replaced_chars: int = 0


def parse_lines(lines: Iterable[str], file: str | None = None) -> Iterator[Record]:
    """Records from log lines, in order; line numbers are 1-based."""
    line_parser = LineParser(file)
    summary = SummaryParser(file)
    for lineno, line in enumerate(lines, 1):
        rec = summary.feed(line, lineno)
        if rec is not None:
            yield rec
        if summary.open:
            continue
        rec = line_parser.parse_line(line, lineno)
        if rec is not None:
            yield rec
    rec = summary.close()
    if rec is not None:
        yield rec


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
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror or exc}); check the path") from None
    with fh:
        head = fh.read(4096)
        fh.seek(0)
        counter = _ReplacementCounter()
        if looks_like_prometheus(head.decode("utf-8", "replace")):
            text = counter.decode(fh.read())
            records: list[Record] = list(parse_prometheus(text, file=name))
        else:
            records = list(parse_lines(counter.lines(fh), file=name))
    warnings = []
    if counter.replaced:
        warnings.append(f"{name}: {counter.replaced} invalid UTF-8 byte sequence(s) replaced")
    if not any(r.kind == "spec_decode" for r in records):
        warnings.append(f"{name}: no speculative-decoding metrics found")
    return ParseResult(records=records, warnings=warnings, replaced_chars=counter.replaced)


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

    def lines(self, fh) -> Iterator[str]:
        for raw in fh:
            yield self.decode(raw)

"""A DataFrame written as ``DataFrame.to_csv(index=False)`` writes it, byte for byte, without ever
holding the whole text.

A group's ``warnings`` cell can hold every window's warnings (MBs on a long log with inconsistent
lines), and ``to_csv`` into a string holds such a cell several times over: the csv writer and
StringIO both keep 4 bytes per character, then the text and its UTF-8 bytes. Here long cells
are swapped for short marks, the (small) rest is written by pandas as before, and each long cell
is streamed in its place in chunks, quoted as the csv module quotes it.
"""

from __future__ import annotations

import csv
import io
import os
import re
import uuid
from collections.abc import Iterator

import pandas as pd

# Cells longer than this are streamed; shorter ones are left to pandas as they are.
LONG_CELL = 1 << 16
_CHUNK = 1 << 16


def csv_chunks(frame: pd.DataFrame) -> Iterator[bytes]:
    """UTF-8 chunks whose concatenation is ``frame.to_csv(index=False).encode()``."""
    long: dict[str, str] = {}
    shown = frame
    for j, col in enumerate(frame.columns):
        if not (pd.api.types.is_object_dtype(frame[col]) or pd.api.types.is_string_dtype(frame[col])):
            continue
        for i, value in enumerate(frame[col]):
            if isinstance(value, str) and len(value) > LONG_CELL:
                if shown is frame:
                    shown = frame.copy()  # copies the object columns' pointers, not their strings
                mark = f"specbench-long-cell-{uuid.uuid4().hex}"
                shown.iat[i, j] = mark
                long[mark] = value
    text = shown.to_csv(index=False)
    if not long:
        yield text.encode("utf-8")
        return
    pos = 0
    for m in re.finditer("|".join(map(re.escape, long)), text):
        yield text[pos : m.start()].encode("utf-8")
        yield from _quoted(long[m.group()])
        pos = m.end()
    yield text[pos:].encode("utf-8")


def _needs_quotes(chunk: str) -> bool:
    """Whether pandas' csv writer (QUOTE_MINIMAL, '"' doubled, lineterminator os.linesep) quotes a
    field holding ``chunk``: it decides character by character, so a long field is quoted exactly
    when one of its chunks would be."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator=os.linesep, quoting=csv.QUOTE_MINIMAL, doublequote=True, quotechar='"').writerow(
        [chunk, ""]
    )  # a second field: a lone empty field is always quoted
    return buf.getvalue().startswith('"')


def _quoted(value: str) -> Iterator[bytes]:
    chunks = range(0, len(value), _CHUNK)
    if not any(_needs_quotes(value[i : i + _CHUNK]) for i in chunks):
        yield from (value[i : i + _CHUNK].encode("utf-8") for i in chunks)
        return
    yield b'"'
    yield from (value[i : i + _CHUNK].replace('"', '""').encode("utf-8") for i in chunks)
    yield b'"'

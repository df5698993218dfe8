"""Metric text as people paste it: in Markdown, quoted, wrapped by hand, elided, cut at a width.

Only candidate lines (a marker found by the C-speed scan) and the few lines after one come here,
so plain string operations and anchored, bounded regexes are enough; nothing here is quadratic.
"""

from __future__ import annotations

import re

# Records never contain these characters, so a record quoted in Markdown ends at the first one:
# the closing backtick of inline code, the pipe closing a table cell, the quote closing a string.
_CLOSERS = ("`", "|", '"', "\u201d")
_WORD_RE = re.compile(r"[A-Za-z]{2,}")
# What precedes a pasted line: blanks, quote marks, table pipes, backticks, a list bullet.
_LEAD_RE = re.compile(r"[ \t>|`]*(?:(?:[-*+]|\d{1,3}[.)])[ \t]+)?")
_FIELD_HEAD_RE = re.compile(r"([A-Za-z#][A-Za-z #()/-]{0,40}?)\s*:")
_DECIMAL_HEAD_RE = re.compile(r"\d{0,15}\.\d{1,15}\s*(?:,|$)")
ELLIPSES = ("...", "\u2026")
MAX_WRAP_LINES = 8  # a record wrapped over more lines than this is not read as one


def locate(prefix: str, body: str) -> tuple[str, bool] | None:
    """``(body, closed)``: the record's text after its marker, cut where Markdown or a quote closes
    it; ``closed`` when such a closer was found. ``None`` when the record is only mentioned in a
    sentence: quoted (backticks or double quotes) with prose words both before and after the quote,
    as in "I think `SpecDecoding metrics: ...` fits our style better"."""
    # A server's own line (the common case), spelled out: a generator here costs more than the scans.
    if (
        "`" not in body
        and "|" not in body
        and '"' not in body
        and "\u201d" not in body
        and "`" not in prefix
        and '"' not in prefix
        and "\u201c" not in prefix
    ):
        return body, False
    end = len(body)
    for ch in _CLOSERS:
        j = body.find(ch, 0, end)
        if j >= 0:
            end = j
    closed = end < len(body)
    after, body = body[end + 1 :], body[:end]
    if body.endswith("\\n"):  # a JSON-wrapped log line ({"log": "...\n"})
        body = body[:-2]
    opener = max(
        prefix.rfind("`") if prefix.count("`") % 2 else -1,
        prefix.rfind('"') if prefix.count('"') % 2 else -1,
        prefix.rfind("\u201c"),
    )
    if opener >= 0:
        before = prefix[:opener]
        if not before.lstrip().startswith("{") and _WORD_RE.search(before) and _WORD_RE.search(after):
            return None
    return body, closed


def elide(body: str) -> str:
    """An author's "..." (or "…") becomes a value of its own that no converter reads, so an elided
    list is unknown (None), never a shorter list, and the fields around it still read."""
    for e in ELLIPSES:
        body = body.replace(e, ",\u2026,")
    return body


def strip_lead(line: str) -> str:
    return line[_LEAD_RE.match(line).end() :]  # type: ignore[union-attr]


def continuation(prev: str, nxt: str, field_names) -> str | None:
    """The text ``nxt`` adds to a record whose text so far is ``prev``, or None when ``nxt`` does not
    continue it. A line continues a record when the author wrapped it: the record's last line ends
    with a comma (or the new one starts with one) and the new line starts with a field name or a
    per-position value; or it starts with a field name the record does not have yet."""
    text = strip_lead(nxt).rstrip()
    if not text:
        return None
    comma = prev.rstrip(" \t`|").endswith(",") or text.startswith(",")
    head = text.lstrip(", ")
    m = _FIELD_HEAD_RE.match(head)
    if m is not None and m.group(1).strip().lower() in field_names:
        if comma or m.group(1).strip().lower() not in prev.lower():
            return text
        return None
    if comma and _DECIMAL_HEAD_RE.match(head):
        return text
    return None


def may_continue(prev: str, nxt: str, field_names) -> bool:
    """A superset of :func:`continuation` for any record ending in ``prev``: where the chunked scan
    may not cut between two lines."""
    text = strip_lead(nxt)
    head = text.lstrip(", ")
    if text.startswith(","):
        return True
    m = _FIELD_HEAD_RE.match(head)
    if m is not None and m.group(1).strip().lower() in field_names:
        return True
    return prev.rstrip(" \t`|\r").endswith(",") and _DECIMAL_HEAD_RE.match(head) is not None


def join(prev: str, text: str) -> str:
    return prev.rstrip(" \t`|\r") + " " + text


def decimals(raw: str) -> int:
    """Digits after the point of a value's leading number (``0.55 tokens`` → 2)."""
    token = raw.strip().split(None, 1)[0] if raw.strip() else ""
    _, dot, frac = token.partition(".")
    n = 0
    for ch in frac:
        if not ch.isdigit():
            break
        n += 1
    return n if dot else 0

"""Field-by-field reading of ``Name: value, Name: value`` metric text.

Every vLLM log format is a marker followed by comma-separated ``Name: value`` pairs whose order,
names and units changed between versions, so fields are matched by name, never by position.
"""

from __future__ import annotations

import math
import re

# A pair ends where the next ", Name:" begins; numbers in a per-position list never start a name.
NUMBER_RE = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|^[-+]?(?:nan|inf)", re.IGNORECASE)
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def pairs_per_comma(body: str) -> list[tuple[str, str]]:
    """:func:`pairs` read segment by segment: Python work per comma (quadratic-free but linear in
    the number of list items); the short-line path of :func:`pairs` and its reference in tests."""
    out: list[tuple[str, list[str]]] = []
    for seg in body.split(","):
        name, sep, value = seg.partition(":")
        name = name.strip()
        if sep and name and (name[0].isalpha() or name[0] == "#"):
            out.append((name.lower(), [value]))
        elif out:
            out[-1][1].append(seg)
    return [(n, ",".join(v).strip()) for n, v in out]


def pairs(body: str) -> list[tuple[str, str]]:
    """``[(lower-cased name, raw value), ...]`` in the order printed.

    Split on commas; a segment without ``Name:`` (e.g. the next number of a per-position list)
    continues the previous value, so a value runs from its colon to the comma before the next
    name. Python work is per colon, found with ``str.find``: a list value's items hold none, so a
    line's cost grows with its number of fields, not of list items, and each search only covers
    the text since the previous colon (linear even in a line of colons, or of commas).
    """
    if body.count(",") < 32:  # a stats line: per comma is quicker than per colon (same result)
        return pairs_per_comma(body)
    starts = []  # (name, where its value starts, the comma that ends the previous value)
    last = -1
    pos = body.find(":")
    while pos >= 0:
        comma = body.rfind(",", last + 1, pos)
        if comma >= 0 or last < 0:  # the first colon of its segment names it (or not)
            name = body[comma + 1 : pos].strip()
            if name and (name[0].isalpha() or name[0] == "#"):
                starts.append((name.lower(), pos + 1, max(comma, 0)))
        last = pos
        pos = body.find(":", pos + 1)
    ends = [s[2] for s in starts[1:]] + [len(body)]
    return [(name, body[start:end].strip()) for (name, start, _), end in zip(starts, ends)]


def number(raw: str) -> float | None:
    """The leading number of a value (``163 tokens`` → 163.0); ``nan`` and garbage → None."""
    head = raw.split(None, 1)[0].rstrip("%,;") if raw and not raw.isspace() else ""
    try:
        value = float(head)
    except ValueError:
        m = NUMBER_RE.match(raw.strip())
        if not m:
            return None
        value = float(m.group(0))
    return None if math.isnan(value) or math.isinf(value) else value


def integer(raw: str) -> int | None:
    value = number(raw)
    if value is None or value != int(value):
        return None
    return int(value)


def fraction(raw: str) -> float | None:
    """A rate as a fraction: ``58.4%`` → 0.584, ``0.642`` → 0.642 (as printed)."""
    value = number(raw)
    if value is None:
        return None
    if raw.strip().endswith("%") or "%" in raw[:12]:
        return round(value / 100.0, 12)
    return value


def number_list(raw: str) -> list[float] | None:
    """``0.882, 0.559, 0.312`` → floats; any ``nan`` entry makes the whole list None."""
    items = [x for x in (s.strip() for s in raw.strip().strip("[]").split(",")) if x]
    out = []
    for item in items:
        value = number(item)
        if value is None:
            return None
        out.append(value)
    return out or None

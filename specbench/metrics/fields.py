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


def pairs(body: str) -> list[tuple[str, str]]:
    """``[(lower-cased name, raw value), ...]`` in the order printed.

    Split on commas; a segment without ``Name:`` (e.g. the next number of a per-position list)
    continues the previous value. Plain string operations: this runs on every metric line of
    multi-GB logs.
    """
    # Each value is kept as its list of segments and joined once: appending to a string would
    # copy it for every comma, quadratic in a hostile line of 10^6 list items.
    out: list[tuple[str, list[str]]] = []
    for seg in body.split(","):
        name, sep, value = seg.partition(":")
        name = name.strip()
        if sep and name and (name[0].isalpha() or name[0] == "#"):
            out.append((name.lower(), [value]))
        elif out:
            out[-1][1].append(seg)
    return [(n, ",".join(v).strip()) for n, v in out]


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

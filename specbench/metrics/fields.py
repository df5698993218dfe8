"""Field-by-field reading of ``Name: value, Name: value`` metric text.

Every vLLM log format is a marker followed by comma-separated ``Name: value`` pairs whose order,
names and units changed between versions, so fields are matched by name, never by position.
"""

from __future__ import annotations

import math
import re

# A pair ends where the next ", Name:" begins; numbers in a per-position list never start a name.
PAIR_RE = re.compile(
    r"(?P<name>[A-Za-z#][A-Za-z0-9#()/\- ]*?)\s*:\s*(?P<value>.*?)\s*(?=,\s*[A-Za-z#][A-Za-z0-9#()/\- ]*?\s*:|,?\s*$)"
)
NUMBER_RE = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|^[-+]?(?:nan|inf)", re.IGNORECASE)
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def pairs(body: str) -> list[tuple[str, str]]:
    """``[(lower-cased name, raw value), ...]`` in the order printed."""
    return [(m.group("name").strip().lower(), m.group("value").strip()) for m in PAIR_RE.finditer(body)]


def number(raw: str) -> float | None:
    """The leading number of a value (``163 tokens`` → 163.0); ``nan`` and garbage → None."""
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

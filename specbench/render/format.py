"""The one home of number formatting for everything specbench prints (report, compare, parse, run).

Every table shows a missing value as :data:`MISSING` and an interval as ``x [lo, hi]``; callers
choose the digits, not the style. Pure functions of their arguments.
"""

from __future__ import annotations

import math
from typing import Any

from specbench.redact import redact_message

# One glyph for "no value" everywhere (was "–", "—" and "-" in different commands).
MISSING = "–"


def is_missing(x: Any) -> bool:
    """None, NaN, or a value that is not a number."""
    if x is None or isinstance(x, bool):
        return x is None
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError):
        return True


def num(x: Any, digits: int = 3, *, sign: bool = False) -> str:
    """``x`` with ``digits`` decimals (``+`` for positive values when ``sign``), or MISSING."""
    if is_missing(x):
        return MISSING
    return f"{float(x):{'+' if sign else ''}.{digits}f}"


def span(values: Any, digits: int = 1) -> str:
    """The range of ``values`` as text: ``3.0-4.2``, or one number when both ends read the same."""
    lo, hi = num(min(values), digits), num(max(values), digits)
    return lo if lo == hi else f"{lo}-{hi}"


def pp(x: Any, digits: int = 2, *, sign: bool = True) -> str:
    """A difference of two fractions in percentage points (``+1.25pp``), or MISSING."""
    return MISSING if is_missing(x) else num(float(x) * 100, digits, sign=sign) + "pp"


def short(x: Any, sig: int = 4) -> str:
    """``sig`` significant digits (``parse``'s records, where magnitudes vary), or MISSING; not a
    float: as is."""
    if x is None:
        return MISSING
    if isinstance(x, float):
        return MISSING if math.isnan(x) else f"{x:.{sig}g}"
    return str(x)


def interval(iv: Any, digits: int = 3, *, sign: bool = False) -> str:
    """``[lo, hi]``, or an empty string when there is no interval."""
    if not iv or is_missing(iv[0]) or is_missing(iv[1]):
        return ""
    return f"[{num(iv[0], digits, sign=sign)}, {num(iv[1], digits, sign=sign)}]"


def with_ci(x: Any, iv: Any, digits: int = 3, *, sign: bool = False, no_ci: str = "") -> str:
    """``x [lo, hi]``; ``x`` plus ``no_ci`` (e.g. "(no CI)") when the interval is missing; MISSING
    when ``x`` is."""
    if is_missing(x):
        return MISSING
    ci = interval(iv, digits, sign=sign)
    text = num(x, digits, sign=sign)
    if ci:
        return f"{text} {ci}"
    return f"{text} {no_ci}" if no_ci else text


def times(x: Any, digits: int = 2) -> str:
    """A ratio such as a speed-up: ``1.23×``, or MISSING."""
    return MISSING if is_missing(x) else f"{num(x, digits)}×"


# C0 (but tab and newline), DEL and C1: 0x9b is a CSI of its own to an 8-bit terminal
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}
# Bidirectional overrides, embeddings, isolates and marks, zero-width characters and the BOM: they
# reorder or hide what a terminal or browser shows (a path that reads as another; "Trojan Source")
_CONTROL.update(
    {c: f"\\u{c:04x}" for c in [0x061C, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xFEFF]}
)


def visible(text: Any) -> str:
    """``text`` with control characters shown as ``\\xNN`` (ESC, NUL, vertical tab ...; a newline
    stays) and bidirectional and zero-width ones as ``\\uNNNN``: a value read from an input never
    moves the cursor, colours a terminal, reorders or hides text."""
    return str(text).translate(_CONTROL)


def shown_text(text: Any) -> str:
    """A string a user gave or a file held (a path, an argument, a name, a message quoting them) as
    any output may show it: credentials hidden (:func:`specbench.redact.redact_message`: a URL's
    user info, even as pathlib folds it, secret query parameters, credential-shaped words) and
    control characters visible. Plain-text output (``print``) shows user strings through this,
    a rich console through :func:`user_text` / :func:`user_line`."""
    return visible(redact_message(str(text)))


def user_text(text: Any) -> str:
    """:func:`shown_text` ready for a rich console: rich markup escaped too (``[/]``, ``[bold]``
    print as written, never a MarkupError)."""
    from rich.markup import escape

    return escape(shown_text(text))


def user_line(text: Any) -> str:
    """:func:`user_text` on one line (an error or warning line): a newline or carriage return
    in a path shows as ``\\n`` / ``\\r``."""
    return user_text(one_line(text))


def one_line(text: Any) -> str:
    """``text`` on one line with every control character visible, a newline as ``\\n``: a name
    (cell title, label) read from an input stays one name in every output."""
    return visible(str(text).replace("\r", "\\r").replace("\n", "\\n"))


def md_line(text: Any) -> str:
    """Markdown prose on one line (a list item): control characters visible, line breaks as spaces,
    so a value read from an input cannot start a line of its own in a PR comment."""
    return visible(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def md_cell(text: Any) -> str:
    """A Markdown table cell: one line, ``|`` escaped, control characters visible."""
    return md_line(text).replace("|", "\\|")

"""Bad values in a side's inputs: input errors (exit 2) naming file, line and field.

A count or a time in a finished request's row must be a finite number >= 0, a count a whole one.
Before, Infinity in a spec-decode count crashed compare (OverflowError), Infinity in ``e2e_s`` made
a speed-up of 0 that failed, one NaN TTFT made a row inconclusive, and a negative count was left
out silently. Rows of errored requests give no figures and are not checked. Type errors (a string
where a number belongs) are :mod:`specbench.records.requests`' to report.

The rows are checked as written, before they are validated into
:class:`specbench.records.requests.RequestRecord` (the only dict-shaped read of a row in compare):
validation converts values (an integer inter-token gap reads as a float) and refuses some bad
values in its own words, so these checks, and their messages naming the value as the file holds
it, come first, as they always have.

Per-position counts of different lengths in one cell (mixed k: repeats or requests served at
different ``num_speculative_tokens``) are refused: pooled, the shorter k silently dropped a
position's check. A cell is one k; a study that varies k has it as an axis.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from specbench.errors import InputError
from specbench.records.requests import errored

_COUNTS = ("output_tokens", "input_tokens", "chunks")
_TIMES = (
    "start_s",
    "ttft_s",
    "ttft_ms",
    "e2e_s",
    "e2e_ms",
    "end_to_end_latency_s",
    "itl_s",
    "itl_ms",
    "inter_token_latency_s",
)
_SPEC = (
    "num_spec_tokens",
    "num_drafts",
    "draft_tokens",
    "accepted_tokens",
    "accepted_per_position",
    "acceptance_histogram",
    "per_step_accepted",
    "per_step_drafted",
)
FIX = "a count or time must be a finite number >= 0 (a count a whole one); re-run the cell or correct the file"


def check_rows(rows: list[tuple[int, dict[str, Any]]], where: str) -> dict[int, int]:
    """InputError ``where:line: field ...`` for the first bad value of a finished request's row
    (as written); returns ``{k: first line}`` of the rows' per-position counts (k = their length)."""
    ks: dict[int, int] = {}
    for line, row in rows:
        if errored(row):
            continue
        for name, value, whole in _fields(row):
            problem = _problem(value, whole)
            if problem:
                raise InputError(f"{where}:{line}: {name} is {problem}; {FIX}")
        sd = row.get("spec_decode")
        pos = sd.get("accepted_per_position") if isinstance(sd, dict) else None
        if isinstance(pos, list):
            ks.setdefault(len(pos), line)
    return ks


def check_k(ks: dict[int, str], cell: str) -> None:
    """InputError when one cell's per-position counts come at more than one k (``{k: where}``)."""
    if len(ks) > 1:
        seen = "; ".join(f"k={k} at {w}" for k, w in sorted(ks.items()))
        raise InputError(
            f"cell {cell}: per-position acceptance counts at different k ({seen}): they cannot be "
            "pooled, and pooling them silently dropped a position's check; split the cell (one k per "
            "cell: make num_speculative_tokens an axis) or re-run it"
        )


def _fields(row: dict[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """``(field, value, must be whole)`` of every count and time of a row, list items one by one.
    A field's name is only written out for a bad value: rows carry lists of hundreds of
    inter-token gaps, and naming each item was most of what compare spent reading a cell."""
    for names, whole, prefix, d in (
        (_COUNTS, False, "", row),
        (_TIMES, False, "", row),
        (_SPEC, True, "spec_decode.", row.get("spec_decode")),
    ):
        if not isinstance(d, dict):
            continue
        for name in names:
            value = d.get(name)
            if isinstance(value, list):
                if not all(_fine(v, whole) for v in value):
                    yield from ((f"{prefix}{name}[{i}]", v, whole) for i, v in enumerate(value))
            else:
                yield f"{prefix}{name}", value, whole


def _fine(value: Any, whole: bool) -> bool:
    """A finite number >= 0 (a whole one where ``whole``), or a value that is no number at all (a
    type error is records' to report): what :func:`_problem` lets pass, without building a message."""
    if type(value) is float:
        return 0.0 <= value < math.inf and (not whole or value.is_integer())
    if type(value) is int:
        return 0 <= value and value.bit_length() <= _MAX_BITS
    return _problem(value, whole) is None


# A whole number past float's range (10^400 in a requests.jsonl) cannot be a count or a time: every
# statistic is computed in floats, so it is refused here with its field, not met later as an OverflowError.
_MAX_BITS = 1023


def _problem(value: Any, whole: bool) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        return f"too large ({'-' if value < 0 else ''}a {value.bit_length()}-bit whole number: past any float)"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value < 0:
        return f"negative ({value!r})"
    if whole and value != int(value):
        return f"not a whole number ({value!r})"
    return None

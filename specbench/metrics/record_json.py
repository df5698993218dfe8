"""Canonical records as JSON lines, byte for byte what ``json.dumps(record.to_dict())`` writes,
without building the dict: ``specbench parse --format jsonl`` writes millions of lines, and the dict
and ``json.dumps``'s generic walk cost ~15 µs a line; this costs a few.

Each record class gets one generated function that formats its fields in the canonical order
(kind first). A field of the type its annotation names takes an inline branch (ints and finite
floats by their repr, as json does; plain ASCII strings quoted as they are); anything else -- a
string that needs escaping, a non-finite float, a value of another type -- goes through
``json.dumps`` itself, so the output is always json's (tests/metrics/test_record_json.py checks it).
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, Callable

from specbench.metrics.record import EngineStatsRecord, SpecDecodeRecord

_dumps = json.dumps
_FORMATTERS: dict[type, Callable[[object], str]] = {}
_STRINGS: dict[str, str] = {}  # str → its JSON text; most strings here recur (format ids, files, times)


def json_line(record) -> str:
    """``json.dumps(record.to_dict())`` (no newline)."""
    fmt = _FORMATTERS.get(type(record))
    if fmt is None:
        return _dumps(record.to_dict())
    return fmt(record)


def json_lines(records) -> str:
    """The records as JSON lines, each ending with a newline."""
    if not records:
        return ""
    get = _FORMATTERS.get
    return "\n".join([(get(type(r)) or json_line)(r) for r in records]) + "\n"


def _string(s) -> str:
    if type(s) is not str:
        return _dumps(s)
    text = _STRINGS.get(s)
    if text is None:
        # json.dumps escapes '"', '\\', control characters, DEL and (ensure_ascii) all non-ASCII.
        plain = s.isascii() and s.isprintable() and '"' not in s and "\\" not in s
        text = '"' + s + '"' if plain else _dumps(s)
        if len(_STRINGS) >= 65536:
            _STRINGS.clear()
        _STRINGS[s] = text
    return text


class _FloatTexts(dict):
    """float → json's text for it (its repr), filled on first use: a log's rates and lengths are
    printed with 1-3 decimals, so few values recur and a lookup is cheaper than a repr. Zeros are
    never stored: -0.0 equals 0.0 as a key, but json writes it "-0.0"."""

    def __missing__(self, v: float) -> str:
        if v - v != 0.0:  # nan, inf: json's own spelling
            return _dumps(v)
        text = repr(v)
        if v:
            if len(self) >= 65536:
                self.clear()
            self[v] = text
        return text


_FLOATS = _FloatTexts()
_NUMBER_TYPES = frozenset((int, float))


def _list(v) -> str:
    if type(v) is list:
        types = {*map(type, v)}
        if types == {float}:
            return "[" + ", ".join(map(_FLOATS.__getitem__, v)) + "]"
        # A list's repr is json's text when its items are exact ints and finite floats ("inf" and
        # "nan" are the only such reprs with an "n").
        if types <= _NUMBER_TYPES:
            text = repr(v)
            if "n" not in text:
                return text
    return _dumps(v)


# One expression per annotation; "{v}" is the field's value. repr of an exact int or a finite float is
# json's text for it (_FLOATS checks finiteness).
_BRANCHES = {
    "int": "('null' if {v} is None else repr({v}) if type({v}) is int else D({v}))",
    "float": "('null' if {v} is None else F[{v}] if type({v}) is float else D({v}))",
    "bool": "('true' if {v} is True else 'false' if {v} is False else D({v}))",
    "str": "('null' if {v} is None else (C({v}) or S({v})) if type({v}) is str else D({v}))",
    "list": "('null' if {v} is None else L({v}))",
}


def _branch(annotation: str) -> str:
    head = annotation.split("|")[0].strip().split("[")[0]
    return _BRANCHES.get(head, "D({v})")


def _generate(cls: type) -> Callable[[object], str]:
    names = [(f.name, str(f.type)) for f in fields(cls) if f.name != "kind"]
    body = ["    k = " + _branch("str").replace("{v}", "r.kind")]
    body += [
        f"    v{i} = r.{name}\n    v{i} = " + _branch(ann).replace("{v}", f"v{i}")
        for i, (name, ann) in enumerate(names)
    ]
    # An f-string: its pieces are joined once (BUILD_STRING), quicker than "%" with a template.
    text = '{{"kind": {k}' + "".join(f', "{name}": {{v{i}}}' for i, (name, _) in enumerate(names)) + "}}"
    src = "def line(r):\n" + "\n".join(body) + f"\n    return f'{text}'\n"
    scope: dict[str, Any] = {"D": _dumps, "S": _string, "L": _list, "F": _FLOATS, "C": _STRINGS.get}
    exec(compile(src, f"<json_line {cls.__name__}>", "exec"), scope)  # our own generated source, never input
    return scope["line"]


for _cls in (SpecDecodeRecord, EngineStatsRecord):
    _FORMATTERS[_cls] = _generate(_cls)

"""YAML and JSON loading that a hostile or careless file cannot turn into a crash.

``yaml.safe_load`` builds no objects, but it still (1) accepts duplicate keys (the last one wins,
silently), (2) expands aliases without limit (a "billion laughs" file of a few hundred bytes
becomes gigabytes once anything walks it; so does one long string aliased many times, and an
alias inside its own anchor, ``a: &a [*a]``, never ends), (3) recurses once per nesting level
(5,000 ``[`` end in RecursionError) and (4) takes seconds per megabyte (pure Python); and (5)
an integer of more than 4300 digits ends in Python's ValueError. :func:`load_yaml` refuses all
five with a YAML error naming the line (text over :data:`MAX_TEXT_CHARS` before parsing it);
:func:`loads_json` bounds nesting the same way. Limits are far above any real config.

:func:`loads_json` is also the one reader of every number in a JSON or JSON Lines file: Python's
JSON reader takes ``NaN``, ``Infinity``, ``1e400`` (read as an infinity) and ``10^400`` (a whole
number no float holds, met later as an OverflowError in a statistic), none of which JSON has or
any writer of specbench's inputs writes; and a finite ``1e300`` overflows the first square taken
of it. Such a number, and any of magnitude :data:`MAX_MAGNITUDE` or more, is refused there,
naming file:line:field (:class:`NumberError`).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

from specbench.errors import InputError

MAX_TEXT_CHARS = 256_000  # a whole YAML text; a study config is 1-2 KB, a gate file less
MAX_DEPTH = 100  # nesting levels; a study config uses about 5
MAX_NODES = 200_000  # nodes after alias expansion; a study config has a few hundred
MAX_CHARS = 1_000_000  # characters of text after alias expansion; a study config has a few thousand
# Digits in one integer: far above any count or size; Python's int() refuses more than 4300 (ValueError).
MAX_INT_DIGITS = 100


class LimitError(yaml.YAMLError):
    def __init__(self, problem: str, mark: yaml.Mark | None = None):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark

    def __str__(self) -> str:
        return self.problem


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys and bounds nesting depth and alias expansion."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node):
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise LimitError(
                f"an integer of {digits} digits (more than {MAX_INT_DIGITS}); write the intended number",
                node.start_mark,
            )
        return super().construct_yaml_int(node)

    def construct_document(self, node):
        _check_expanded_size(node)
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # "<<: *base" then overriding a key is what merge keys are for
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # unhashable: SafeLoader reports it below
                if first is not key_node:
                    raise LimitError(
                        f"duplicate key {key!r} (first on line {first.start_mark.line + 1}); keep one",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)


def _check_expanded_size(root: yaml.Node) -> None:
    # Sizes with aliases expanded, memoised per node: linear in the file, not in the expansion.
    # A node met again while its own children are being sized is an alias of an ancestor
    # ("a: &a [*a]"): it expands without end, so it is refused rather than sized.
    sizes: dict[int, tuple[int, int]] = {}  # id -> (values, characters of scalars)
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not done:
            if id(node) in open_:
                raise LimitError(
                    "an alias refers to a node that contains it (recursive alias); write the value out", node.start_mark
                )
            open_.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        open_.discard(id(node))
        values = 1 + sum(sizes[id(c)][0] for c in children)
        own = len(node.value) if isinstance(node, yaml.ScalarNode) else 0
        chars = own + sum(sizes[id(c)][1] for c in children)
        if values > MAX_NODES:
            raise LimitError(f"expands to more than {MAX_NODES} values (aliases nested in aliases?)", node.start_mark)
        if chars > MAX_CHARS:
            raise LimitError(
                f"expands to more than {MAX_CHARS} characters of text (a long value aliased many times?)",
                node.start_mark,
            )
        sizes[id(node)] = (values, chars)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml(text: str) -> Any:
    """Parse one YAML document with :class:`StrictLoader` (raises yaml.YAMLError subclasses)."""
    if len(text) > MAX_TEXT_CHARS:
        raise LimitError(f"{len(text)} characters, more than {MAX_TEXT_CHARS}; is this the intended file?")
    line = _flow_too_deep(text)
    if line is not None:
        raise LimitError(f"brackets nested deeper than {MAX_DEPTH} levels", yaml.Mark("", 0, line, 0, None, None))
    return yaml.load(text, Loader=StrictLoader)  # StrictLoader is a SafeLoader


def _flow_too_deep(text: str) -> int | None:
    # PyYAML's scanner keeps a "possible simple key" per open bracket and rescans them for every
    # token: 5,000 "[" take seconds before the composer's depth check is ever reached. Brackets
    # are counted first (quoted text skipped; a comment can only make this stricter).
    depth, quote, line = 0, "", 0
    for ch in text:
        if ch == "\n":
            line += 1
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line
        elif ch in "]}" and depth:
            depth -= 1
    return None


def loads_json(text: str, source: Path | str | None = None, *, line: int = 1, fix: str = "") -> Any:
    """``json.loads`` that raises ValueError (not RecursionError) for runaway nesting, and refuses
    every number that is not finite or out of range (:func:`in_range`): a :class:`NumberError` naming ``source`` (the file; ``line`` is the line ``text`` starts on) and
    the field, then ``fix`` (what to do; by default fix the field or re-run what wrote the file)."""
    marks: list[_Refused] = []
    try:
        data = _hooked(marks).decode(text)  # json.loads with this file's number hooks
    except RecursionError:
        raise ValueError("nested deeper than Python can read") from None
    found = _first_refused(data) if marks else None
    if found is not None:
        field, mark = found
        raise NumberError(source, line + _line_offset(text, mark.seq), field, mark.text, fix)
    return data


# -- numbers no file may hold ---------------------------------------------------------------------
# Past any count, time, rate or seed a run writes (a year is 3e16 ns, a seed 2**128 at most 3.4e38),
# and small enough that a sum of squares of a million of them stays finite.
MAX_MAGNITUDE = 1e100
_FIX = "fix that field (or re-run the command that wrote the file)"
_PAST = "past any count, time or rate (1e100 or more)"
_NUMBER_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:NaN|Infinity)|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')


def in_range(value: Any) -> bool:
    """Whether a number read from a file is one every statistic here can use: finite and of
    magnitude below :data:`MAX_MAGNITUDE` (an int is compared exactly: ``float(10**400)`` would
    overflow, the comparison does not)."""
    return -MAX_MAGNITUDE < value < MAX_MAGNITUDE  # False for NaN too


class NumberError(InputError):
    """A number a JSON file may not hold; the message names file:line:field."""

    def __init__(self, source: Path | str | None, line: int, field: str, token: str, fix: str = "") -> None:
        where = f"{source}:{line}" if source is not None else f"line {line}"
        digits = len(token.lstrip("-"))
        if _whole(token):
            shown = f"a {digits}-digit whole number, " + ("past any float" if digits > 308 else _PAST)
        elif math.isfinite(float(token)):
            shown = f"{token}, {_PAST}"
        else:
            shown = f"{float(token)}, not a finite number"  # nan, inf, -inf (1e400 is read as inf)
        super().__init__(f"{where}: {field} is {shown}; {fix or _FIX}")
        self.line, self.field = line, field


class _Refused:
    __slots__ = ("seq", "text")

    def __init__(self, seq: int, text: str) -> None:
        self.seq, self.text = seq, text


def _whole(token: str) -> bool:
    return not any(c in token for c in ".eEIN")


def _refused(token: str) -> bool:
    """The hooks' rule (:func:`_hooked`) on a number's text: NaN, an infinity, a float that overflows
    or is out of range, or a whole number of more than :data:`MAX_INT_DIGITS` digits (10**100 has
    101; int() refuses more than 4300). Only to find a refused number's line again (_line_offset)."""
    if _whole(token):
        return len(token.lstrip("-")) > MAX_INT_DIGITS
    return not in_range(float(token))


def _mark(marks: list[_Refused], token: str) -> _Refused:
    marks.append(_Refused(len(marks), token))
    return marks[-1]


def _hooked(marks: list[_Refused]) -> json.JSONDecoder:
    """A decoder whose number hooks keep what :func:`_refused` keeps and put a :class:`_Refused` in
    ``marks`` (and in the data, at its place) for the rest. Every number goes through one: they are
    a Python call each, kept lean (a conversion and a comparison; no scan of the text)."""

    def parse_float(t: str) -> Any:
        v = float(t)  # "1e400" is inf, out of range as NaN is
        return v if -MAX_MAGNITUDE < v < MAX_MAGNITUDE else _mark(marks, t)

    def parse_int(t: str) -> Any:
        if len(t) <= MAX_INT_DIGITS or (len(t) == MAX_INT_DIGITS + 1 and t[0] == "-"):
            return int(t)
        return _mark(marks, t)

    def parse_constant(t: str) -> Any:  # NaN, Infinity, -Infinity
        return _mark(marks, t)

    return json.JSONDecoder(parse_float=parse_float, parse_int=parse_int, parse_constant=parse_constant)


def _first_refused(data: Any) -> tuple[str, _Refused] | None:
    """``(field path, mark)`` of the first refused number in document order (walked with a stack:
    a value nested as deep as the reader allows stays readable)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, _Refused):
            return where or "the value", value
        if isinstance(value, dict):
            stack.extend(reversed([(f"{where}.{k}" if where else str(k), v) for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([(f"{where}[{i}]", v) for i, v in enumerate(value)]))
    return None


def _line_offset(text: str, seq: int) -> int:
    """Lines before the ``seq``-th refused number of ``text`` (json's hooks see them in text order)."""
    k = 0
    for m in _NUMBER_TOKEN.finditer(text):
        token = m.group()
        if token[0] != '"' and _refused(token):
            if k == seq:
                return text.count("\n", 0, m.start())
            k += 1
    return 0

"""YAML and JSON loading that a hostile or careless file cannot turn into a crash.

``yaml.safe_load`` builds no objects, but it still (1) accepts duplicate keys (the last one wins,
silently), (2) expands aliases without limit (a "billion laughs" file of a few hundred bytes
becomes gigabytes once anything walks it; so does one long string aliased many times, and an
alias inside its own anchor, ``a: &a [*a]``, never ends), (3) recurses once per nesting level
(5,000 ``[`` end in RecursionError) and (4) takes seconds per megabyte (pure Python); and (5)
an integer of more than 4300 digits ends in Python's ValueError. :func:`load_yaml` refuses all
five with a YAML error naming the line (text over :data:`MAX_TEXT_CHARS` before parsing it);
:func:`loads_json` bounds nesting the same way. Limits are far above any real config.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

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


def loads_json(text: str) -> Any:
    """``json.loads`` that raises ValueError (not RecursionError) for runaway nesting."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested deeper than Python can read") from None

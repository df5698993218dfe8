"""Generators of damaged inputs for the contract test: pure functions of a seeded ``random.Random``.

Tree damage (on parsed YAML/JSON): delete a key, swap a value's type, put a hostile value (NUL,
``../``, huge or non-finite numbers, 10^4-character strings) or runaway nesting somewhere.
Text damage: truncation, flipped/inserted bytes, a duplicated line (duplicate keys), an alias bomb,
binary garbage, an empty file. Filesystem damage lives in the test (it needs the paths).
"""

from __future__ import annotations

import json
import random
from typing import Any

import yaml

DEEP = "__DEEP__"
HOSTILE: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    10**30,
    1e308,
    float("inf"),
    float("nan"),
    "",
    " ",
    "\0",
    "a\0b",
    "../../etc/passwd",
    "/etc",
    "x" * 10_000,
    [],
    {},
    [1],
    [None],
    {"a": 1},
    {"": None},
    "[]",
    "{}",
    "1e12",
    "-0",
    "ñ\u202e",
    DEEP,
]
ALIAS_BOMB = (
    "bomb_a: &a [x, x, x, x, x, x, x, x, x, x]\nbomb_b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "bomb_c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nbomb_d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "bomb_e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nbomb_f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
)


def paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a node (dict keys and list indexes), the root excluded."""
    out = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.append(prefix + (k,))
            out += paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.append(prefix + (i,))
            out += paths(v, prefix + (i,))
    return out


def _parent(tree: Any, path: tuple) -> Any:
    for p in path[:-1]:
        tree = tree[p]
    return tree


def swap_type(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return rng.choice([str(value).lower(), int(value), None])
    if isinstance(value, (int, float)):
        return rng.choice([str(value), [value], float(value) + 0.5, -value, value * 10**12, True])
    if isinstance(value, str):
        return rng.choice([[value], {value: value}, len(value), value * 3, value[: len(value) // 2], 1.5])
    if isinstance(value, list):
        return rng.choice([{"k": value}, value[:1], value + value, "".join(map(str, value)), value[::-1], []])
    if isinstance(value, dict):
        return rng.choice([list(value.values()), list(value), str(value), {}, {**value, "unknown_field": 1}])
    return rng.choice(HOSTILE)


def mutate_tree(tree: Any, rng: random.Random, avoid: tuple = ()) -> tuple[Any, str]:
    """A deep copy of ``tree`` with one damage; returns (tree, description). ``avoid``: path prefixes
    left alone (where secrets sit, so a test can check they stay hidden)."""
    tree = json.loads(json.dumps(tree, allow_nan=True))
    candidates = [p for p in paths(tree) if not any(p[: len(a)] == a for a in avoid)]
    if not candidates:
        return rng.choice(HOSTILE), "root replaced"
    path = rng.choice(candidates)
    parent = _parent(tree, path)
    op = rng.choice(["delete", "swap", "hostile", "hostile", "rename"])
    if op == "delete":
        del parent[path[-1]]
    elif op == "swap":
        parent[path[-1]] = swap_type(parent[path[-1]], rng)
    elif op == "rename" and isinstance(parent, dict):
        parent[rng.choice([1, "", "\0", "Name", path[-1] + "_", "../x"])] = parent.pop(path[-1])
    else:
        parent[path[-1]] = rng.choice(HOSTILE)
    return tree, f"{op} at {'/'.join(map(str, path))}"


def deep_text(fmt: str) -> str:
    return "[" * 5000 + "]" * 5000 if fmt == "json" else "[" * 5000 + "]" * 5000


def dump(tree: Any, fmt: str) -> bytes:
    if fmt == "json":
        text = json.dumps(tree, indent=1, allow_nan=True)
    else:
        text = yaml.safe_dump(tree, sort_keys=False, allow_unicode=True)
    return text.replace(json.dumps(DEEP) if fmt == "json" else DEEP, deep_text(fmt)).encode("utf-8")


def mutate_text(data: bytes, rng: random.Random, fmt: str) -> tuple[bytes, str]:
    """One byte-level damage to a file's content; returns (bytes, description)."""
    op = rng.choice(["truncate", "flip", "insert", "dup_line", "garbage", "empty", "bom", "crlf", "bomb", "deep"])
    n = len(data)
    if op == "truncate":
        cut = rng.randrange(n) if n else 0
        return data[:cut], f"truncated at {cut}"
    if op == "flip" and n:
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(n)] = rng.randrange(256)
        return bytes(b), "bytes flipped"
    if op == "insert":
        at = rng.randrange(n + 1)
        junk = rng.choice(
            [b"\0", b"\xff\xfe", b"{", b"[", b": :", b"\n  - ", b"&x ", b"*x", b"!!python/object:os.system"]
        )
        return data[:at] + junk + data[at:], f"inserted {junk!r} at {at}"
    if op == "dup_line" and fmt == "yaml":
        lines = data.split(b"\n")
        i = rng.randrange(len(lines))
        return b"\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1 :]), f"line {i + 1} duplicated"
    if op == "garbage":
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 2000))), "binary garbage"
    if op == "empty":
        return b"", "empty"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "BOM"
    if op == "crlf":
        return data.replace(b"\n", b"\r\n"), "CRLF"
    if op == "bomb" and fmt == "yaml":
        return ALIAS_BOMB.encode() + data, "alias bomb"
    return deep_text(fmt).encode(), "5000-deep nesting"

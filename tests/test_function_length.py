"""Functions in specbench/ stay short enough to read in one screen: at most 60 lines from ``def`` to
the last line, with at most ``MAX_LONG`` exceptions, each saying in its docstring why it is long
(a hot loop a split would slow, measured). Today there are none; a function that grows past the
limit is split along its steps, as the rest were.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60
MAX_LONG = 3


def long_functions(package: Path, root: Path = ROOT) -> list[tuple[str, int, bool]]:
    """``(path:line name, lines, has a docstring)`` of every function over LIMIT lines."""
    out = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > LIMIT:
                    where = f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name}"
                    out.append((where, lines, ast.get_docstring(node) is not None))
    return out


def test_functions_are_at_most_sixty_lines_with_few_documented_exceptions() -> None:
    found = long_functions(ROOT / "specbench")
    assert len(found) <= MAX_LONG, f"over {LIMIT} lines (split them along their steps): {found}"
    assert all(doc for _, _, doc in found), f"a long function must say why in its docstring: {found}"


def test_the_count_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert [(w, n) for w, n, _ in long_functions(tmp_path, tmp_path)] == [("m.py:5 long", LIMIT + 1)]

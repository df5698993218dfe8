"""Imports of specbench modules are written at the top of a module, where import-linter sees them.

An import inside a function hides a layer violation or a cycle until the line runs (the layers
contract in pyproject.toml reads every import, but only a top-level one breaks at import time, so
only those keep the structure honest). The one reason to import inside a function is to keep a
heavy dependency (numpy/pydantic, pandas, matplotlib, httpx, vLLM, Ray) out of start-up, so
``specbench --help`` stays instant; each such line says so with a ``# lazy: <why>`` comment, on the
line itself or the line above.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "specbench"
MARK = "# lazy:"

# No module is allowed an unmarked import inside a function (the list emptied once every package
# was converted); it stays as the one place to record a temporary exception, which must only shrink.
ALLOWED: dict[str, int] = {}


def _is_specbench(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "specbench"
    return any(alias.name.split(".")[0] == "specbench" for alias in node.names)


def function_imports(path: Path) -> list[int]:
    """Line numbers of the unmarked ``import specbench...`` / ``from specbench... import`` (or
    relative) statements inside a function body of ``path``, at any depth."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found: list[int] = []

    def marked(node: ast.stmt) -> bool:
        first, last = node.lineno, node.end_lineno or node.lineno
        return any(MARK in lines[i - 1] for i in range(max(first - 1, 1), last + 1))

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                if _is_specbench(child) and not marked(child):
                    found.append(child.lineno)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(text, filename=str(path)), False)
    return found


def offenders() -> dict[str, list[int]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = function_imports(path)
        if lines:
            out[path.relative_to(ROOT).as_posix()] = lines
    return out


def test_specbench_imports_inside_functions_are_marked_lazy() -> None:
    found = offenders()
    over = {m: ls for m, ls in found.items() if len(ls) > ALLOWED.get(m, 0)}
    listing = "\n".join(f"{m}:{n}" for m, ls in over.items() for n in ls)
    assert not over, (
        "import these specbench modules at the top of the module, or, if the import keeps a heavy "
        f"dependency out of start-up, say so with '{MARK} <why>' on the line or the line above:\n{listing}"
    )


def test_the_scan_sees_nested_relative_and_marked_imports(tmp_path) -> None:
    """The scanner itself: what it must find and what it must let through."""
    src = tmp_path / "m.py"
    src.write_text(
        "from specbench.io import save_json\n"  # 1 top level: fine
        "import json\n"
        "def f():\n"
        "    import json\n"  # 4 not specbench: fine
        "    from specbench.errors import ConfigError\n"  # 5 offender
        "    if True:\n"
        "        import specbench.io\n"  # 7 offender, nested in a block
        "    def g():\n"
        "        from . import x\n"  # 9 offender, relative
        "    # lazy: pulls in matplotlib\n"
        "    from specbench.render.plots import style\n"  # 11 marked on the line above
        "    from specbench.compare import (  # lazy: numpy\n"  # 12 marked, multi-line
        "        DEFAULT_GATES,\n"
        "    )\n"
        "class C:\n"
        "    from specbench import io\n"  # 16 class body, not a function: fine
        "    def m(self):\n"
        "        from specbench import io\n",  # 18 offender, method
        encoding="utf-8",
    )
    assert function_imports(src) == [5, 7, 9, 18]

"""The package's layout reads as the pipeline (docs/internals.md): few modules loose at the root,
no file name used for two different things, and every package saying its job in its docstring."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from specbench.config import limits

PACKAGE = Path(__file__).resolve().parents[1] / "specbench"
MAX_ROOT_MODULES = 6  # besides __init__ and __main__ (today 5: errors, io, safe_yaml, axis, redact)


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_at_most_six_modules_sit_at_the_package_root() -> None:
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(loose) <= MAX_ROOT_MODULES, f"modules loose at specbench/: {sorted(loose)}; give them a package"


def test_no_module_name_is_used_twice() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for p in _modules():
        if p.name != "__init__.py":
            where[p.name].append(p.relative_to(PACKAGE).as_posix())
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, f"one file name, two modules (name each for what it holds): {twice}"


def test_no_module_is_named_like_a_folder_of_specbench() -> None:
    """``compare/results.py`` beside ``specbench/results/`` read as the run directory's code; every
    folder of the package (data folders such as ``prompts/`` included) is a name no module takes."""
    folders = {p.name for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"}
    clash = [p.relative_to(PACKAGE).as_posix() for p in _modules() if p.stem in folders]
    assert not clash, f"modules named like a folder of specbench/ (rename them for what they hold): {clash}"


def test_every_package_says_its_job() -> None:
    silent = [
        init.parent.relative_to(PACKAGE.parent).as_posix()
        for init in PACKAGE.rglob("__init__.py")
        if "__pycache__" not in init.parts and not (ast.get_docstring(ast.parse(init.read_text())) or "").strip()
    ]
    assert not silent, f"packages without a docstring saying their job: {silent}"


def test_the_studys_limits_are_written_once_in_config_limits() -> None:
    """No module of config/ writes a limit's number itself, as a pydantic bound (``le=``, ``lt=``)
    or in a comparison: each reads it from config/limits.py, so the schema and the checks agree."""
    values = {v for k, v in vars(limits).items() if k.startswith("MAX_")}
    found = []
    for path in sorted((PACKAGE / "config").glob("*.py")):
        if path.name == "limits.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            bounds = [kw.value for kw in node.keywords if kw.arg in ("le", "lt")] if isinstance(node, ast.Call) else []
            if isinstance(node, ast.Compare):
                bounds += [node.left, *node.comparators]
            found += [
                f"{path.name}:{b.lineno}: {b.value}"
                for b in bounds
                if isinstance(b, ast.Constant) and not isinstance(b.value, bool) and b.value in values
            ]
    assert not found, f"a limit written outside config/limits.py: {found}"

"""Every project file a doc, docstring or comment names exists: a path like
``specbench/results/store.py``, ``tests/conftest.py`` or ``benchmarks/noise_floor.py``, and a dotted
module like ``specbench.compare.sides`` (an attribute after it is allowed). A moved or renamed
module otherwise leaves readers pointed at nothing (internals.md once named a module that never
existed)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATH = re.compile(r"(?<![\w./-])((?:specbench|tests|benchmarks|configs|docs)/[\w./-]*\w)")
DOTTED = re.compile(r"(?<![\w./-])(specbench(?:\.\w+)+)")
SOURCES = ["README.md", "docs/**/*.md", "specbench/**/*.py", "tests/**/*.py", "benchmarks/**/*.py", "configs/*.yaml"]


def _texts():
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            if path.resolve() != Path(__file__).resolve():
                yield path, path.read_text(encoding="utf-8")


def _path_exists(name: str) -> bool:
    name = name.rstrip(".")
    if any(ch in name for ch in "*{<") or re.search(r"/x\.\w+$", name):
        return True  # a pattern or a made-up example, not a path
    if (ROOT / name).exists():
        return True
    head, _, tail = name.rpartition("/")  # specbench/io.atomic_write: an attribute of a module
    module = tail.split(".", 1)[0]
    return "." in tail and (ROOT / head / f"{module}.py").exists()


def _module_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    base = ROOT
    for i, part in enumerate(parts):
        if (base / part).is_dir():
            base = base / part
            continue
        if (base / f"{part}.py").exists():
            return True  # the rest names something inside the module
        init = base / "__init__.py"  # else an attribute the package itself defines
        return i >= 1 and init.exists() and re.search(rf"\b{re.escape(part)}\b", init.read_text()) is not None
    return True


def _missing() -> list[str]:
    missing = []
    for path, text in _texts():
        where = path.relative_to(ROOT)
        for m in PATH.finditer(text):
            if not _path_exists(m.group(1)):
                missing.append(f"{where}: {m.group(1)}")
        for m in DOTTED.finditer(text):
            if not _module_exists(m.group(1)):
                missing.append(f"{where}: {m.group(1)}")
    return sorted(set(missing))


def test_every_named_project_path_and_module_exists() -> None:
    assert _missing() == []

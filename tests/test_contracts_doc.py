"""docs/contracts.md names what exists: every file it names in backticks (``specbench/io.py``,
``report/screen.py``, or ``sides.py`` in a row or section about ``specbench/compare/``) is there,
and the fields it gives ``Cell`` are ``Cell``'s. tests/test_named_paths.py checks the full paths of
every doc; this one also resolves the short names a contract row or section uses."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from specbench.run.cells import Cell

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "contracts.md"
TICKED = re.compile(r"`([^`\s]+)`")
FILE = re.compile(r"^[\w./]+\.py$")
DIR = re.compile(r"^[\w./]+/$")


def _blocks(text: str):
    """(section heading, block) for every table row and every paragraph of the doc."""
    heading = ""
    for para in re.split(r"\n\s*\n", text):
        for line in para.splitlines():
            if line.startswith("#"):
                heading = line
        rows = [ln for ln in para.splitlines() if ln.startswith("|")]
        yield from ((heading, row) for row in rows) if rows else [(heading, para)]


def _contexts(heading: str, block: str) -> list[Path]:
    named = [t for t in TICKED.findall(heading + "\n" + block) if t.startswith("specbench/")]
    dirs = [ROOT / (t if t.endswith("/") else t.rsplit("/", 1)[0]) for t in named]
    subdirs = [t for t in TICKED.findall(block) if DIR.match(t)]
    bases = [ROOT, ROOT / "specbench", *dirs]
    return bases + [b / s for b in bases for s in subdirs]


def _missing(text: str) -> list[str]:
    missing = []
    for heading, block in _blocks(text):
        contexts = _contexts(heading, block)
        for name in TICKED.findall(block):
            if (FILE.match(name) or DIR.match(name)) and not any((c / name).exists() for c in contexts):
                missing.append(name)
    return sorted(set(missing))


def test_every_file_contracts_md_names_exists():
    assert _missing(DOC.read_text(encoding="utf-8")) == []


def test_a_name_nothing_has_is_caught():
    # the resolver is not so lenient that a module of another package's name passes
    assert _missing("| `specbench/compare/` | `verdicts.py` <- `checks.py` |\n") == ["checks.py"]


def test_the_fields_it_gives_a_cell_are_cells():
    text = DOC.read_text(encoding="utf-8")
    (row,) = [ln for ln in text.splitlines() if ln.startswith("| `specbench/run/cells.py` |")]
    listed = re.search(r"`Cell` list \((.*?)\);", row)
    assert listed, row
    names = re.findall(r"`(\w+)`", re.sub(r"\([^()]*\)", "", listed.group(1)))
    fields = {f.name for f in dataclasses.fields(Cell)}
    assert names and set(names) <= fields, sorted(set(names) - fields)

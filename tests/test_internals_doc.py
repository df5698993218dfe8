"""docs/internals.md draws the layer stack that import-linter keeps: the picture must be the
contract, row for row, or a newcomer learns a stack the linter does not enforce."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, published as tomli before 3.11
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


def _contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c.get("containers") == ["specbench"]]
    return [" : ".join(part.strip() for part in row.split(":")) for row in contract["layers"]]


def _drawn_layers() -> list[str]:
    text = (ROOT / "docs" / "internals.md").read_text()
    section = text.split("## Layers", 1)[1]
    block = section.split("```", 2)[1]
    rows = []
    for line in block.strip("\n").splitlines():
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]  # the row's modules, before its note
        parts = [p.strip().removesuffix("/").removesuffix(".py") for p in names.split(" : ")]
        rows.append(" : ".join(parts))
    return rows


def test_the_layer_picture_in_internals_md_is_the_import_linter_contract():
    assert _drawn_layers() == _contract_layers()

"""Fixtures for compare tests; the run-directory writer lives in specbench/testing/simruns.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from realruns import copy_run

from specbench.testing.simruns import write_run


@pytest.fixture
def copy(tmp_path):
    """A copy of the committed default-study run, to alter as a candidate."""
    return copy_run(tmp_path / "cand")


@pytest.fixture
def make_run(tmp_path):
    def make(name: str, cells: list[dict[str, Any]], **kw) -> Path:
        return write_run(tmp_path / name, cells, run_id=name, **kw)

    return make

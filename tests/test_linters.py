"""The lint step of CI, as tests: import-linter (the layers in pyproject.toml), ruff (lint and the
format check) and mypy. Each runs the tool installed beside this Python (the ``test`` extra), as a
subprocess from the repository root, and fails with the tool's own output, so a broken layer or a
type error reads the same here as on the command line.

mypy is marked ``slow``: a cold run type-checks the whole package with numpy, pandas and pydantic
(about a minute of CPU); with its cache (.mypy_cache) a rerun takes seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str, timeout: float = 300) -> None:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(
            f"{tool} is not installed beside {sys.executable}; install the test extra: pip install -e '.[test]'"
        )
    proc = subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{tool} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}", pytrace=False)


def test_layers_hold() -> None:
    """No module imports from a layer above its own (pyproject's [tool.importlinter])."""
    _run("lint-imports", "--no-cache")


def test_ruff_check() -> None:
    _run("ruff", "check", "--no-cache", "specbench", "tests", "benchmarks")


def test_ruff_format() -> None:
    _run("ruff", "format", "--check", "--no-cache", "specbench", "tests", "benchmarks")


@pytest.mark.slow
def test_mypy() -> None:
    _run("mypy", "specbench", timeout=900)

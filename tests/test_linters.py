"""The lint step of CI, as tests: import-linter (the layers in pyproject.toml), ruff (lint and the
format check) and mypy. Each runs the tool installed beside this Python (the ``test`` extra), as a
subprocess from the repository root, and fails with the tool's own output, so a broken layer or a
type error reads the same here as on the command line.

mypy is marked ``slow``: a cold run type-checks the whole package with numpy, pandas and pydantic
(about 30-60 s of CPU); with its cache a rerun takes seconds. The cache is kept beside the user's
other caches (``~/.cache/specbench/mypy``, or ``$SPECBENCH_MYPY_CACHE``), not in the checkout, so
a fresh clone (CI's) reuses it: mypy validates each cached module against its source's hash, so a
changed file is checked again."""

from __future__ import annotations

import os
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
    """No module imports from a layer above its own, and the read side (compare, report, render,
    analysis) nothing of run, serve or load (pyproject's [tool.importlinter])."""
    _run("lint-imports", "--no-cache")


def test_ruff_check() -> None:
    _run("ruff", "check", "--no-cache", "specbench", "tests", "benchmarks")


def test_ruff_format() -> None:
    _run("ruff", "format", "--check", "--no-cache", "specbench", "tests", "benchmarks")


@pytest.mark.slow
def test_mypy() -> None:
    cache = os.environ.get("SPECBENCH_MYPY_CACHE") or str(Path.home() / ".cache" / "specbench" / "mypy")
    _run("mypy", "--cache-dir", cache, "specbench", timeout=900)

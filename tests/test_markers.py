"""The fast loop (``-m "not vllm and not slow"``) leaves out the ``heavy`` tests, while the full
suite keeps them where they were collected: only ``slow`` tests are handed to the workers first
(tests/conftest.py), so marking a test heavy never changes CI's schedule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = "tests/test_io_inputs.py::test_option_files_that_are_fifos_are_refused"
FILES = ["tests/test_io_inputs.py", "tests/test_linters.py"]


def _collected(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n0", "-p", "no:cacheprovider", "--collect-only", "-q", *args, *FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if "::" in line]


@pytest.mark.heavy
def test_heavy_tests_are_out_of_the_fast_loop_and_keep_their_place() -> None:
    fast = _collected("-m", "not vllm and not slow")
    assert fast and not any(t.startswith(HEAVY) for t in fast)
    assert any(t.startswith("tests/test_io_inputs.py::") for t in fast)  # its light tests stay
    every = _collected()
    first_heavy = next(i for i, t in enumerate(every) if t.startswith(HEAVY))
    slow = [i for i, t in enumerate(every) if t.startswith("tests/test_linters.py::test_mypy")]
    # mypy (slow) is handed out first, ahead of the io file's tests; the heavy ones stay among theirs
    assert slow == [0], every[:3]
    assert every[first_heavy - 1].startswith("tests/test_io_inputs.py::"), every[first_heavy - 1]

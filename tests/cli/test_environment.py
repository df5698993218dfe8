"""The terminal specbench runs in is not its input: an encoding that cannot hold the output, a
COLUMNS of 0, a full disk behind standard output. Real processes, the committed default run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "baselines" / "cpu-default"
LOG = RUN / "mla-on__output_norm-on__r0" / "server.log"


def _specbench(*args: str, env: dict[str, str] | None = None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specbench", *args],
        env={**os.environ, **(env or {})},
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        errors="backslashreplace",
        timeout=300,
    )


@pytest.mark.heavy
def test_an_ascii_terminal_keeps_the_verdict(tmp_path):
    """Before: exit 2 "input is not UTF-8 text" after the Markdown was written; the verdict lost."""
    md = tmp_path / "gate.md"
    # one repeat a side: a latency check is within-run only and never passes (inconclusive, exit 3)
    args = ("compare", str(RUN), str(RUN), "--gate", "ttft_p50_ms:+50%", "--markdown", str(md))
    utf8 = _specbench(*args)
    ascii_ = _specbench(*args, env={"PYTHONIOENCODING": "ascii"})
    assert utf8.returncode == 3, utf8.stderr
    assert ascii_.returncode == utf8.returncode, ascii_.stderr
    assert "not UTF-8" not in ascii_.stderr and ascii_.stdout.isascii()
    assert utf8.stdout.splitlines()[-1] == ascii_.stdout.splitlines()[-1].encode().decode("unicode_escape")
    assert "INCONCLUSIVE" in ascii_.stdout and "\\xb7" in ascii_.stdout  # the "·" of a cell title, escaped


@pytest.mark.parametrize("columns", ["0", "5", "-3", "abc"])
def test_a_nonsense_width_does_not_hide_the_error(columns):
    """Before: COLUMNS=0 printed no error line at all."""
    r = _specbench("parse", "/nonexistent/x.log", env={"COLUMNS": columns})
    assert r.returncode == 2
    assert "/nonexistent/x.log" in r.stderr and "not found" in r.stderr


def test_a_full_disk_behind_stdout_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        r = _specbench("parse", str(LOG), stdout=full)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device writing the output" in lines[0], r.stderr

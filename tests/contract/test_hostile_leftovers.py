"""Hostile inputs that still got through (issue 58), each now one line and its exit code, through
the real CLI (subprocess): markup in a path, a count past float's range, a URL with a password given
where a run directory goes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results/baselines/cpu-default"
CELL = "mla-on__output_norm-on__r0"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specbench", *map(str, args)], capture_output=True, text=True)


@pytest.mark.heavy
def test_markup_in_a_path_is_shown_as_written(tmp_path):
    """Before: "[bold]" in a directory name vanished from parse's title (read as Rich markup)."""
    odd = tmp_path / "[bold]x"
    odd.mkdir()
    log = odd / "s[red].log"
    shutil.copy(RUN / CELL / "server.log", log)
    res = cli("parse", log)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].startswith(f"{log}: 6 record(s)")
    bad = odd / "c[/x].yaml"
    res = cli("validate", bad)
    assert res.returncode == 2 and f"{bad}: config file not found" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "MarkupError" not in res.stderr


@pytest.mark.heavy
def test_a_count_past_floats_range_is_exit_2_naming_file_line_and_field(tmp_path):
    """Before: "unexpected OverflowError" from compare and report for output_tokens = 10^400."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    f = run / CELL / "requests.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    rows[0]["output_tokens"] = 10**400
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for args in (("compare", RUN, run, "-q"), ("report", run, "--out", tmp_path / "rep", "--no-plots")):
        res = cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        line = res.stderr.strip().splitlines()[-1]
        assert f"{f}:1: output_tokens" in line and "past any float" in line, line
        assert "Overflow" not in res.stderr


def test_a_password_in_a_url_given_as_a_run_is_not_echoed():
    """Before: "https:/u:secret@h/r: no such run directory" (pathlib folds the URL's //, which then
    no longer read as a URL to the redactor)."""
    res = cli("compare", "https://u:secret@h/r", RUN)
    assert res.returncode == 2 and "secret" not in res.stderr and "u:***@h/r" in res.stderr, res.stderr
    res = cli("--debug", "compare", "https://tok123@h/r", RUN)
    assert res.returncode == 2 and "tok123" not in res.stderr  # nor in the traceback

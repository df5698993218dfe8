"""The run's final screen ends with the `specbench report` command to run next: run exactly as
printed (issue 41: its --out lay inside the run, and report refused it, exit 2)."""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from specbench.report.screen import final_screen

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"


@pytest.mark.heavy
def test_the_suggested_report_command_runs_as_printed(tmp_path):
    run = tmp_path / "results" / RUN.name
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    buf = io.StringIO()
    Console(file=buf, width=80, no_color=True).print(final_screen(run), crop=False)  # as run/display.py prints it
    line = next(x for x in buf.getvalue().splitlines() if x.startswith("Report, plots and divergence: "))
    argv = shlex.split(line.split(": ", 1)[1])
    assert argv[:2] == ["specbench", "report"] and len(line) > 80  # one line, not wrapped at 80 columns
    r = subprocess.run(
        [sys.executable, "-m", "specbench", *argv[1:], "--no-plots"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "report" / RUN.name / "summary.md").is_file()
    assert sorted(p.name for p in run.parent.iterdir()) == [RUN.name]  # nothing beside the run


@pytest.mark.heavy
def test_k_advice_says_its_assumptions_once(tmp_path):
    """issue 41: `report` printed the same assumptions paragraph once per cell (six times); issue 57:
    by default the k advice is one line per run, each cell's only with --verbose."""

    def advice(*extra: str) -> list[str]:
        r = subprocess.run(
            [sys.executable, "-m", "specbench", "report", str(RUN), "--out", str(tmp_path / "r"), "--no-plots", *extra],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "400"},
        )
        assert r.returncode == 0, r.stderr
        return [x for x in r.stdout.splitlines() if "k advice" in x or "No k recommended" in x]

    once = advice()
    assert len(once) == 1 and "6 cell(s) measured at k = 3 only" in once[0], once
    every = [x for x in advice("--verbose") if x.startswith("k advice")]
    assert len(every) == 7  # the assumptions, then one line per speculative cell
    assert sum("does not depend on where the verify step starts" in x for x in every) == 1
    assert all("no k recommended (unchecked prediction from k = 3" in x for x in every[1:])


@pytest.mark.heavy
def test_the_suggested_command_shows_a_hostile_run_path_as_every_output_does(tmp_path):
    """A run directory under a folder named like a token, with an escape sequence and markup in its
    name: the suggested command hides the token and shows the escape, as every echoed path does."""
    token = "hf_" + "Zq7" * 8
    run = tmp_path / token / "run\x1b[31m[bold]x"
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    buf = io.StringIO()
    Console(file=buf, width=80, no_color=True).print(final_screen(run), crop=False)
    out = buf.getvalue()
    (line,) = [x for x in out.splitlines() if x.startswith("Report, plots and divergence: ")]
    assert token not in out and "\x1b" not in out
    assert "***" in line and "\\x1b[31m[bold]x" in line

"""Every input error names the input and says what is wrong with it (issue 43's last probe): a file
that fails mid-read, a path holding a newline, one input given twice, a cell.json whose status
specbench never writes. Real processes on copies of the committed default run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "baselines" / "cpu-default"
LOG = RUN / "mla-on__output_norm-on__r0" / "server.log"


def _specbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=300, env=os.environ.copy()
    )


def _one_error(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


@pytest.mark.heavy
@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_a_read_that_fails_mid_file_names_the_input():
    """/proc/self/mem is a regular file of size 0 whose read fails (EIO): before, a bare
    "Input/output error" that named nothing."""
    line = _one_error(_specbench("parse", "/proc/self/mem"))
    assert "/proc/self/mem: cannot read log (Input/output error)" in line


@pytest.mark.heavy
def test_a_newline_in_a_path_is_shown_not_a_line_break(tmp_path):
    path = tmp_path / "a\nb.log"
    line = _one_error(_specbench("parse", str(path)))
    assert f"{tmp_path}/a\\nb.log: log not found" in line


@pytest.mark.heavy
def test_one_input_given_twice_says_so(tmp_path):
    """Before: a message about a --label nobody gave."""
    log = tmp_path / "l.log"
    shutil.copy(LOG, log)
    line = _one_error(_specbench("report", str(log), str(log), "--out", str(tmp_path / "out")))
    assert f"{log}: given twice" in line and "--label" not in line


@pytest.mark.heavy
def test_an_unknown_cell_status_is_an_input_error(tmp_path):
    """Before: compare exit 3 (a failed cell), report exit 0 with the cell left out."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    cell = run / "mla-on__output_norm-on__r0" / "cell.json"
    cell.write_text(json.dumps({**json.loads(cell.read_text()), "status": "weird"}))
    for args in (("compare", str(run), str(RUN)), ("report", str(run), "--out", str(tmp_path / "out"))):
        line = _one_error(_specbench(*args))
        assert f"{cell}: status" in line and "unknown cell status 'weird'" in line


@pytest.mark.heavy
def test_two_outputs_on_one_path_are_refused_before_any_work(tmp_path):
    """Before: `--json X --markdown X` wrote one and silently overwrote it with the other."""
    out = tmp_path / "x.out"
    line = _one_error(_specbench("compare", str(RUN), str(RUN), "--json", str(out), "--markdown", str(out)))
    assert "writes there too" in line and str(out) in line and not out.exists()


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["requests.jsonl", "summary.json"])
def test_a_self_linked_run_file_is_an_input_error(tmp_path, name):
    """Before: a requests.jsonl or summary.json linked to itself read as absent (report exit 0)."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    target = run / "mla-on__output_norm-on__r0" / name
    target.unlink()
    target.symlink_to(name)
    line = _one_error(_specbench("report", str(run), "--out", str(tmp_path / "out")))
    assert f"{target}: cannot read (Too many levels of symbolic links)" in line


@pytest.mark.heavy
def test_a_bench_result_with_more_positions_than_any_draft_names_itself(tmp_path):
    """Before: 10^5 per-position rates printed a 10^5-column table (and once blamed acceptance.json)."""
    data = json.loads((ROOT / "tests" / "metrics" / "data" / "vllm_bench" / "detailed.json").read_text())
    data["spec_decode_per_position_acceptance_rates"] = [0.5] * 100_000
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(data))
    line = _one_error(_specbench("parse", str(bench)))
    assert f"{bench}:1: spec_decode_per_position_acceptance_rates has 100,000 positions" in line


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--executor", "bogus"], "--executor 'bogus': use local or ray"),
        (["--address", "127.0.0.1:1"], "--address and --max-concurrent-cells need --executor ray"),
    ],
)
def test_a_bad_executor_option_writes_nothing(tmp_path, args, said):
    """issue 42: `run --executor bogus` wrote a planned run directory, then exited 2."""
    out = tmp_path / "out"
    line = _one_error(_specbench("run", str(ROOT / "configs" / "default.yaml"), *args, "--out", str(out)))
    assert said in line and not out.exists()

"""An undecided compare is short: the default study against a same-config copy (every check too weak
at 20 prompts) prints at most 40 lines at 120 columns, undecided checks one line per reason, the
warnings on stderr; ``-q`` prints the verdict line only. (It printed 24 near-identical lines of
~600 characters before.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "baselines" / "cpu-default"


def _rerun_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "rerun"
    shutil.copytree(RUN, copy, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["run_id"] += "-copy"  # another run of one config, not the same run
    manifest["vllm_version"] = "0.32.1"  # and one difference compare warns about
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def _compare(*args: object) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "120", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "specbench", "compare", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.heavy
def test_an_undecided_compare_fits_a_screen_and_q_prints_the_verdict_only(tmp_path):
    copy = _rerun_copy(tmp_path)
    r = _compare(RUN, copy)
    assert r.returncode == 3, r.stdout + r.stderr
    shown = sum(max(1, -(-len(line) // 120)) for line in (r.stdout + r.stderr).splitlines())
    assert shown <= 40, r.stdout + r.stderr
    undecided = [line for line in r.stdout.splitlines() if line.startswith("INCONCLUSIVE ")]
    assert (
        len(undecided) == 2 and "20 with an interval that straddles" in r.stdout
    )  # 20 checks, one line per gate's reason
    assert "MLA on · norm on: p_0, p_1, p_2" in undecided[1]  # display names, as the table
    assert "runs differ: vLLM version" in r.stderr and "runs differ" not in r.stdout  # warnings: stderr
    q = _compare(RUN, copy, "-q")
    assert q.returncode == 3 and q.stdout.splitlines() == [r.stdout.splitlines()[-1]]

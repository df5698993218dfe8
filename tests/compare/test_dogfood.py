"""specbench gates itself: this session's default CPU study vs the committed baseline.

The baseline under results/baselines/cpu-default was produced by `specbench run` on the default
config (see its manifest.json). Tolerances (docs/gate.md, "specbench gates itself"): reruns of the same
config on the same CPU give the same counts; 5% / 5pp absorbs bf16 differences between the CPU
MLA backends (AMX_MLA vs CPU_MLA) on other x86 machines.

The gate must not fail open: a run whose cells failed (`specbench run` exit 3) is not a pass,
and neither is a compare that could not decide a check (exit 3).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm

BASELINE = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
GATES = ["--gate", "acceptance_length:-5%", "--gate", "per_position[*]:-5pp"]


def test_default_study_does_not_regress_against_committed_baseline(default_study, default_study_exit, tmp_path):
    assert (BASELINE / "manifest.json").is_file(), "committed baseline missing"
    assert default_study_exit in (None, 0), f"the gated run itself exited {default_study_exit} (failed cells)"
    not_done = [
        p.parent.name for p in default_study.glob("*/cell.json") if json.loads(p.read_text()).get("status") != "done"
    ]
    assert not not_done, f"cells of the gated run did not finish: {not_done}"
    md = tmp_path / "gate.md"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "specbench",
            "compare",
            str(BASELINE),
            str(default_study),
            *GATES,
            "--markdown",
            str(md),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    text = md.read_text()
    for cell in ("MLA on · norm off", "MLA off · norm logits-only"):  # cells by axis values (render/tables.py)
        assert cell in text
    assert "0 failed, 0 inconclusive" in text

"""specbench gates itself: this session's default CPU study vs the committed baseline.

The baseline under results/baselines/cpu-default was produced by `specbench run` on the default
config (see its manifest.json). Tolerances: 5% / 5pp absorbs bf16 differences between the CPU MLA
backends (AMX_MLA vs CPU_MLA) and between reruns (two runs of the same config on the same 2-core VM
21 minutes apart had identical counts on only 3-11 of 20 prompts per cell).

At the default study's 20 prompts most checks cannot see 5% / 5pp, and compare says so: they are
inconclusive ("too weak"), exit 3, never a pass. So this test asks what 20 prompts can answer: no
check failed, and every check that is not a pass is too weak rather than missing or broken. The
powered version of this gate, sized to its tolerances, is the CI recipe (docs/ci/github-actions.yml:
configs/ci-gate.yaml against results/baselines/cpu-gate), checked on committed real runs by
tests/compare/test_ci_gate.py.

The gate must not fail open: a run whose cells failed (`specbench run` exit 3) is not a pass.
"""

import json
import re
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
    assert res.returncode in (0, 3), res.stdout[-3000:] + res.stderr[-2000:]
    text = md.read_text()
    for cell in ("MLA on · norm off", "MLA off · norm logits-only"):  # cells by axis values (render/tables.py)
        assert cell in text
    head = re.search(
        r"(\d+) passed(?:, (\d+) cannot fail[^,]*)?, (\d+) failed, (\d+) inconclusive"
        r"(?: \((\d+) with an interval that straddles)?",
        text,
    )
    assert head, text[:2000]
    passed, vacuous, failed, inconclusive, weak = (int(x or 0) for x in head.groups())
    assert failed == 0 and passed + vacuous + inconclusive == 24, head.group(0)
    assert inconclusive == weak, f"an inconclusive check that is not merely too weak: {head.group(0)}"

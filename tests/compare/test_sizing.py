"""Evidence sized to the gate (specbench/compare/sizing.py, ``specbench run --gate``): two sides of
the size the sizing asks for, drawn from a real run's prompts, get no "too weak" check from
``specbench compare`` (the power rule of specbench/compare/power.py is the independent judge), and a
third of that size does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from realruns import run

from specbench.compare.gates import parse_gate
from specbench.compare.sizing import describe, size_gates

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "results" / "baselines" / "cpu-workloads"
DEFAULT = ROOT / "results" / "baselines" / "cpu-default"
GATES = ["acceptance_length:-5%", "per_position[*]:-5pp"]
KEYS = ("num_drafts", "draft_tokens", "accepted_tokens", "accepted_per_position")


def _resampled(src: Path, dst: Path, n: int, seed: int = 0) -> Path:
    """A copy of ``src`` whose speculative cells hold ``n`` requests drawn with replacement from the
    cell's own, each under a prompt id of its own (new prompts of the same population; two draws
    with different seeds share no prompt id, so compare takes them unpaired, the sizing's bound);
    acceptance.json's units and totals follow."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    rng = np.random.default_rng(seed)
    for cell in sorted(p for p in dst.iterdir() if (p / "acceptance.json").is_file()):
        acc = json.loads((cell / "acceptance.json").read_text())
        if not acc.get("per_request"):
            continue
        rows = [json.loads(x) for x in (cell / "requests.jsonl").read_text().splitlines() if x.strip()]
        drawn = [
            {**rows[j], "id": i, "prompt_id": f"draw{seed}-{i}", "prompt_sha256": f"{seed:032x}{i:032x}"}
            for i, j in enumerate(rng.integers(0, len(rows), n))
        ]
        (cell / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in drawn))
        k = acc["num_spec_tokens"]
        units = [{**{key: r["spec_decode"][key] for key in KEYS}, "num_spec_tokens": k, "derived": []} for r in drawn]
        tot = {key: sum(u[key] for u in units) for key in KEYS[:3]}
        tot["accepted_per_position"] = [sum(u["accepted_per_position"][i] for u in units) for i in range(k)]
        acc["per_request"]["units"] = units
        for source in ("per_request", "prometheus", "logs"):
            acc[source]["counts"].update(tot)
        acc["logs"]["windows"] = [dict(acc["logs"]["counts"])]
        acc["derived"], acc["ci"] = {}, None
        (cell / "acceptance.json").write_text(json.dumps(acc))
    return dst


@pytest.mark.heavy
def test_sides_of_the_sized_size_have_no_weak_check(tmp_path):
    sizing = size_gates(WORKLOADS, [parse_gate(g) for g in GATES])
    n = sizing.needed
    assert 20 < n < 2000 and sizing.prompts == 80 and sizing.too_weak  # 80 prompts are too few here
    gates = [a for g in GATES for a in ("--gate", g)]
    base = _resampled(WORKLOADS, tmp_path / "base", n, seed=1)
    cand = _resampled(WORKLOADS, tmp_path / "cand", n, seed=2)
    code, out = run(base, cand, *gates, "--verbose", "--force")  # resampled sides share no prompt id
    assert "straddles" not in out, out[-3000:]
    assert code == 0, out[-3000:]
    # a third of the size is too weak somewhere: the size was needed
    small_b = _resampled(WORKLOADS, tmp_path / "small_b", n // 3, seed=1)
    small_c = _resampled(WORKLOADS, tmp_path / "small_c", n // 3, seed=2)
    code, out = run(small_b, small_c, *gates, "--force")
    assert code == 3 and "straddles" in out, out[-3000:]
    assert size_gates(base, [parse_gate(g) for g in GATES]).prompts == n


def test_a_twenty_request_baseline_is_too_weak_and_says_how_to_remake_it():
    sizing = size_gates(DEFAULT, [parse_gate(g) for g in GATES])
    assert sizing.too_weak and sizing.prompts == 20
    assert sizing.needed > 109  # more than the built-in prompt set holds
    # checks no candidate can fail (p_1, p_2 of a head with output norm off: baseline ~0) need nothing
    assert all(c.n_alike == 0 for c in sizing.checks if c.why)
    assert any(c.why for c in sizing.checks)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gate", "acceptance_length:-5%"], "go together"),
        (["--gate", "acceptance_length:-5%", "--gate-baseline", str(DEFAULT)], "it sent 20 prompts per cell"),
        (
            ["--gate", "acceptance_length:-5%", "--gate-baseline", str(DEFAULT), "--as-baseline"],
            "workload builtin has 109",
        ),
    ],
)
def test_run_gate_refusals_exit_2_naming_the_fix(args, message):
    from typer.testing import CliRunner

    from specbench.cli.main import app

    result = CliRunner().invoke(app, ["run", "--dry-run", *args], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert message in result.output


def _gated_dry_run(baseline: Path, *extra: str):
    """`specbench run configs/ci-gate.yaml --dry-run` gated on ``baseline`` (in-process)."""
    from typer.testing import CliRunner

    from specbench.cli.main import app

    gates = [a for g in GATES for a in ("--gate", g)]
    argv = ["run", "configs/ci-gate.yaml", "--dry-run", *gates, "--gate-baseline", str(baseline), *extra]
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    return result.output


def test_dry_run_prints_the_sized_load():
    """--as-baseline from a pilot: the new baseline's size, in the plan's request count."""
    sizing = size_gates(WORKLOADS, [parse_gate(g) for g in GATES])
    output = _gated_dry_run(WORKLOADS, "--as-baseline")
    assert f"~{sizing.needed:,} distinct prompts per cell (both sides, paired)" in output
    assert f"cells x {sizing.needed:,}" in output


@pytest.mark.heavy
def test_a_candidate_sends_what_its_hardest_check_needs_of_the_baselines_prompts():
    """Gated against a baseline larger than its checks need (the committed cpu-gate sent 198), the
    candidate sends the first ~needed of the baseline's prompts (same seed: the shuffled workload's
    prefix, tests/load/test_workloads.py), not all of them: the CI recipe's time."""
    base = ROOT / "results" / "baselines" / "cpu-gate"
    sizing = size_gates(base, [parse_gate(g) for g in GATES])
    have = json.loads((base / "manifest.json").read_text())["resolved_config"]["load"]["num_requests"]
    assert 0 < sizing.needed < have
    output = _gated_dry_run(base)
    assert f"the baseline's first {sizing.needed:,} of {have:,} prompts per cell, paired" in output
    assert f"cells x {sizing.needed:,}" in output


def test_other_gates_count_in_holms_family_and_are_named_as_not_sized():
    """A latency gate beside the acceptance ones is not sized by prompts, but compare holds its
    checks in the same Holm family: the acceptance checks' level, and so their size, follow."""
    alone = size_gates(WORKLOADS, [parse_gate("acceptance_length:-5%")])
    mixed = size_gates(WORKLOADS, [parse_gate("acceptance_length:-5%"), parse_gate("ttft_p50_ms:+50%")])
    assert len(mixed.checks) == len(alone.checks) and mixed.m > alone.m and mixed.needed > alone.needed
    assert any("ttft_p50_ms:+50%" in line and "not sized" in line for line in describe(mixed))


@pytest.mark.heavy
def test_a_pilot_with_more_cells_sizes_only_the_studys_own():
    """configs/ci-gate.yaml's study (4 cells) sized from a 6-cell pilot (its logits-only cells since
    dropped): Holm's family and the sizes are the 4 cells' (16 checks), not the pilot's 24; a
    pilot with none of the study's cells sizes from all of its own and says so."""
    from specbench.compare.sides import cell_key

    pilot = ROOT / "results" / "reruns" / "ci-gate-6cells-a"
    gates = [parse_gate(g) for g in ("acceptance_length:-5%", "per_position[*]:-5pp")]
    keys = {cell_key({"mla": m, "output_norm": n}) for m in ("on", "off") for n in ("on", "off")}
    whole, own = size_gates(pilot, gates), size_gates(pilot, gates, only=keys)
    assert whole.m == 24 and own.m == 16
    assert {c.cell for c in own.checks} == {f"mla={m}, output_norm={n}" for m in ("on", "off") for n in ("on", "off")}
    assert own.z < whole.z and own.needed <= whole.needed and not own.notes
    other = size_gates(pilot, gates, only={cell_key({"mla": "on", "workload": "sharegpt"})})
    assert other.m == 24 and other.notes == [f"{pilot} has none of this study's cells: sized from all of its cells"]

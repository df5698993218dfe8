"""Between-run variance (specbench/compare/noise.py): latency and throughput checks against a
whole-run shift from machine load.

Runs are copies of the committed default study (results/baselines/cpu-default) whose every time
is scaled by one factor per repeat, as a rerun on a busier machine shows, and the committed
same-config reruns themselves (benchmarks/noise_floor.py matches their cells). Before, the
within-run intervals made a 2.4x whole-run slow-down a regression (e.g. e2e_p50_ms 1525 -> 3607
ms between real reruns failed ``e2e_p50_ms:+10%``).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.cli.exits import compare_exit
from specbench.cli.main import run_cli
from specbench.compare import compare_sides, load_side, parse_gate
from specbench.compare.noise import BETWEEN, DEFAULT_FLOORS, WITHIN, Floor, load_floors
from specbench.testing import reruns as noise_floor

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "baselines" / "cpu-default"
GATE = "e2e_p50_ms:+10%"
RUN_LEVEL_GATES = [GATE, "ttft_p50_ms:+10%", "itl_p50_ms:+10%", "output_tok_per_s:-5%", "speedup:-5%"]


def _scale_summary(summary: dict, f: float) -> dict:
    out = {}
    for key, value in summary.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "throughput" in key or key.endswith("tok_per_s") or key.endswith("per_min"):
                value = value / f
            elif "latency_s" in key or "ttft_s" in key:
                value = value * f
        out[key] = value
    return out


def _scale_cell(cell: Path, f: float) -> None:
    path = cell / "requests.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for r in rows:
        for key in ("start_s", "ttft_s", "e2e_s"):
            r[key] *= f
        r["itl_s"] = [x * f for x in r["itl_s"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = cell / "summary.json"
    s.write_text(json.dumps(_scale_summary(json.loads(s.read_text()), f)))


def make_run(dst: Path, factors: list[float]) -> Path:
    """A copy of the committed default study with ``len(factors)`` repeats of every cell, repeat r's
    times scaled by ``factors[r]`` (its throughput divided by it), acceptance untouched."""
    shutil.copytree(BASELINE, dst, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    manifest = json.loads((dst / "manifest.json").read_text())
    cells = []
    for cid in manifest["cells"]:
        for r, _f in enumerate(factors):
            new = cid[: -len("__r0")] + f"__r{r}"
            if r:
                shutil.copytree(dst / cid, dst / new)
                record = json.loads((dst / new / "cell.json").read_text())
                (dst / new / "cell.json").write_text(json.dumps({**record, "cell_id": new, "repeat": r}))
            cells.append(new)
    for cid in cells:
        _scale_cell(dst / cid, factors[int(cid.rsplit("__r", 1)[1])])
    (dst / "manifest.json").write_text(json.dumps({**manifest, "cells": cells, "run_id": dst.name}))
    return dst


def cli(base: Path, cand: Path, tmp_path: Path, *gates: str, resamples: int = 500) -> tuple[int, dict, str]:
    """``specbench compare`` in this process (run_cli: the command's own code path, streams
    captured); the real process's exit status and streams are checked by
    test_the_noise_floor_flag_replaces_the_default and the contract tests."""
    out = tmp_path / f"{base.name}-{cand.name}.json"
    args = [x for g in gates for x in ("--gate", g)]
    argv = ["compare", str(base), str(cand), *args, "--json", str(out), "--resamples", str(resamples)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = run_cli(argv)
    return code, json.loads(out.read_text()) if out.exists() else {}, stdout.getvalue() + stderr.getvalue()


def checks(data: dict, metric: str) -> list[dict]:
    return [g for c in data["cells"] for g in c["gates"] if g["metric"] == metric]


def test_a_whole_run_slowdown_with_one_repeat_is_inconclusive_within_run_only(tmp_path):
    """2.4x every time of the run (a busy VM): the default gates plus e2e_p50_ms:+10% no longer exit
    1. Each e2e check says it was past the tolerance inside the run (the old verdict: FAIL) but not
    past the noise floor, and is inconclusive (exit 3)."""
    base, cand = make_run(tmp_path / "base", [1.0]), make_run(tmp_path / "busy", [2.4])
    code, data, out = cli(
        base, cand, tmp_path, "acceptance_length:-3%", "per_position[*]:-2pp", GATE, resamples=2000
    )  # as in CI: with fewer, Holm over 32 checks could pass it anyway
    assert code == 3, out
    assert not data["regressions"]
    e2e = checks(data, "e2e_p50_ms")
    assert len(e2e) == 8 and {g["status"] for g in e2e} == {"inconclusive"}
    for g in e2e:
        assert g["scope"] == WITHIN
        assert (
            "within-run only: past the tolerance inside this run, but not past the noise floor of e2e_p50_ms"
            in (g["message"])
        )
    # the acceptance checks pass their intervals, but 40 requests cannot see 3% / 2pp (issue 37)
    others = [g for c in data["cells"] for g in c["gates"] if g["metric"] != "e2e_p50_ms"]
    assert all(g["status"] == "pass" or (g["status"] == "inconclusive" and g["undecided"]) for g in others)
    row = next(m for c in data["cells"] for m in c["metrics"] if m["name"] == "e2e_p50_ms")
    assert row["scope"] == WITHIN and "within-run only: 1 vs 1 repeats" in row["method"] and row["verdict"] == "~"
    assert "latency/throughput check(s) are within-run only" in out and "e2e_p50_ms +250%" in out


@pytest.mark.heavy
def test_a_slowdown_beyond_the_noise_floor_fails(tmp_path):
    """6x: past (1 + 10%) x 3.5 = 3.85x of the baseline's e2e median in every cell: exit 1. (Holm
    over 32 checks asks p <= 0.08%: a bootstrap p-value needs 2000 resamples to get there.)"""
    base, cand = make_run(tmp_path / "base", [1.0]), make_run(tmp_path / "slow", [6.0])
    code, data, out = cli(base, cand, tmp_path, "acceptance_length:-3%", "per_position[*]:-2pp", GATE, resamples=2000)
    assert code == 1, out
    failed = data["regressions"]
    assert {g["metric"] for g in failed} == {"e2e_p50_ms"} and len(failed) == 8
    assert all("beyond the noise floor of e2e_p50_ms, +250%" in g["message"] for g in failed)


@pytest.mark.heavy
def test_every_run_level_metric_is_held_to_its_floor(tmp_path):
    """2.4x: inside every floor (latency +250%, tok/s -75%, speed-up -70%); no check fails. The
    speed-up does not move (its baseline cell slowed with it): its interval lies within 5%, but within-run
    only that is no pass (tests/compare/test_power.py)."""
    base, cand = make_run(tmp_path / "base", [1.0]), make_run(tmp_path / "busy", [2.4])
    gates = [parse_gate(g) for g in RUN_LEVEL_GATES]
    comp = compare_sides(load_side(base), load_side(cand), gates)
    assert not comp.failures
    assert {g.metric for g in comp.inconclusive if not g.undecided} == {
        "e2e_p50_ms",
        "ttft_p50_ms",
        "itl_p50_ms",
        "output_tok_per_s",
    }
    assert all(g.scope == WITHIN for g in comp.checks)
    speedup = [g for g in comp.checks if g.metric == "speedup"]
    # within-run only never passes: its interval does not hold a whole-run shift (power.py)
    assert {g.status for g in speedup} == {"inconclusive"} and all("within-run only" in g.undecided for g in speedup)


@pytest.mark.heavy
def test_repeats_are_the_unit_a_consistent_regression_fails(tmp_path):
    """Three repeats a side: one value per repeat, Welch t over repeats. A 2.4x regression in every
    repeat, with the repeats within 10% of each other, is past the tolerance between runs: exit 1."""
    base = make_run(tmp_path / "base", [1.0, 1.05, 1.1])
    cand = make_run(tmp_path / "slow", [2.4, 2.5, 2.6])
    code, data, out = cli(base, cand, tmp_path, GATE)
    assert code == 1, out
    e2e = checks(data, "e2e_p50_ms")
    assert len(e2e) == 8 and {g["status"] for g in e2e} == {"fail"} and {g["scope"] for g in e2e} == {BETWEEN}
    row = next(m for c in data["cells"] for m in c["metrics"] if m["name"] == "e2e_p50_ms")
    assert row["method"].startswith(
        "between repeats: one value per repeat (the median over its requests), Welch t, 3 vs 3 repeats"
    )


@pytest.mark.heavy
def test_repeats_a_shift_within_their_spread_is_no_regression(tmp_path):
    """Two repeats a side. The baseline's own repeats differ 2.4x (one ran on a busy machine); the
    candidate sits inside that spread: the between-repeat interval covers it, no check fails."""
    base = make_run(tmp_path / "base", [1.0, 2.4])
    cand = make_run(tmp_path / "cand", [2.4, 2.4])
    gates = [parse_gate(g) for g in RUN_LEVEL_GATES]
    # two repeats that differ 2.4x cannot see a 5-10% change (issue 37): no failure, and no pass
    comp = compare_sides(load_side(base), load_side(cand), gates)
    assert not comp.failures and all(g.undecided for g in comp.inconclusive), [g.message for g in comp.inconclusive]
    assert {g.scope for g in comp.checks} == {BETWEEN}


@pytest.mark.heavy
def test_repeats_on_one_side_only_are_within_run(tmp_path):
    base = make_run(tmp_path / "base", [1.0, 1.1])
    cand = make_run(tmp_path / "cand", [2.4])
    comp = compare_sides(load_side(base), load_side(cand), [parse_gate(GATE)])
    assert not comp.failures and {g.scope for g in comp.checks} == {WITHIN}


@pytest.mark.heavy
def test_the_speedup_per_repeat_is_over_the_same_repeat_of_its_baseline(tmp_path):
    """Repeat 1 of every cell, baseline cells included, ran 2x slower: each repeat's speed-up is
    the same, so the between-repeat interval is of zero width around no change: a pass."""
    base = make_run(tmp_path / "base", [1.0, 2.0])
    comp = compare_sides(
        load_side(base), load_side(make_run(tmp_path / "cand", [1.0, 2.0])), [parse_gate("speedup:-5%")]
    )
    rows = [r for c in comp.cells for r in c.rows if r.name == "speedup"]
    assert rows and all(r.scope == BETWEEN and r.se == pytest.approx(0.0, abs=1e-12) for r in rows)
    assert compare_exit(comp) == 0


# -- the committed same-config reruns ---------------------------------------------------------


def _rerun_pairs(runs: list[Path]):
    """Ordered pairs of cells that ran the same server under the same load on the same machine.
    These runs predate attestation, which alone would make every check inconclusive: what they
    ran is known from cell.json's argv and env (benchmarks/noise_floor.py), so it is set aside."""
    groups: dict[tuple, list] = {}
    for run in runs:
        for entry in noise_floor.cells_of(run):
            for cell in (entry[1], entry[2]):
                if cell is not None:
                    cell.unattested = []
            groups.setdefault(entry[0], []).append(entry)
    return [
        (a, b) for members in groups.values() for i, a in enumerate(members) for j, b in enumerate(members) if i != j
    ]


@pytest.mark.heavy
def test_committed_same_vm_reruns_do_not_fail_each_other(tmp_path):
    """The head-variants and seed-questions studies ran the same cells (same server, load and VM;
    2026-12-03, 3 hours apart): e2e_p50_ms moved up to +210% between them. Under the default gates
    and every latency / throughput gate, no check of any ordered pair fails; the within-run
    intervals alone failed e2e_p50_ms:+10% in 7 of 26 ordered pairs (with the third run)."""
    from specbench.compare.cellwise import compare_cell
    from specbench.compare.gates import DEFAULT_GATES

    runs = [ROOT / "results" / "reruns" / n for n in ("head-variants-2026-12-03", "seed-questions-2026-12-03")]
    try:  # the third rerun on that VM, the default study as committed before 2026-12-04
        runs.append(noise_floor.materialize("52278e8:results/baselines/cpu-default", tmp_path))
    except (subprocess.CalledProcessError, OSError):
        pass  # a shallow clone: the two runs of today's tree still hold the worst pair
    pairs = _rerun_pairs(runs)
    assert len(pairs) >= 12
    gates = [parse_gate(g) for g in (*DEFAULT_GATES, *RUN_LEVEL_GATES)]
    before: dict[str, int] = {}  # checks the within-run interval alone failed
    for (_, bc, br, _), (_, cc, cr, _) in pairs:
        cell = compare_cell(bc, cc, gates, refs=(br, cr), n_resamples=500)
        assert not [g.message for g in cell.gates if g.status == "fail"], (bc.name, cc.name)
        for g in cell.gates:
            if "past the tolerance inside this run" in g.message:
                before[g.metric] = before.get(g.metric, 0) + 1
    assert before.get("e2e_p50_ms", 0) >= 3 and before.get("output_tok_per_s", 0) >= 3, before


def test_the_default_floors_cover_the_worst_committed_rerun():
    """The floors in noise.py are at least the worst harm benchmarks/noise_floor.py measures over the
    committed same-VM reruns in today's tree."""
    from specbench.compare.cellwise import compare_cell

    runs = [ROOT / "results" / "reruns" / n for n in ("head-variants-2026-12-03", "seed-questions-2026-12-03")]
    worst: dict[str, float] = {}
    for (_, bc, br, _), (_, cc, cr, _) in _rerun_pairs(runs):
        for r in compare_cell(bc, cc, refs=(br, cr), n_resamples=100).rows:
            if r.name in DEFAULT_FLOORS and r.base and r.cand:
                change = r.cand / r.base - 1
                worse = -change if r.metric.higher_is_better else change
                worst[r.name] = max(worst.get(r.name, 0.0), worse)
    assert worst["e2e_p50_ms"] > 2.0  # the 1163 -> 3607 ms pair
    for name, change in DEFAULT_FLOORS.items():
        if name in worst:
            assert abs(change) >= worst[name], name


def test_a_noise_floor_file(tmp_path):
    f = tmp_path / "floors.yaml"
    f.write_text("e2e_p50_ms: +50%\noutput_tok_per_s: -0.3\n")
    floors = load_floors(f)
    assert floors["e2e_p50_ms"] == Floor(0.5, f"from {f}") and floors["e2e_p50_ms"].factor == 1.5
    assert floors["output_tok_per_s"].factor == pytest.approx(1 / 0.7)
    assert floors["ttft_p50_ms"].change == DEFAULT_FLOORS["ttft_p50_ms"]
    from specbench.errors import ConfigError

    for bad, why in (
        ("e2e_p50_ms: -50%", "positive change"),
        ("speedup: +10%", "negative change"),
        ("acceptance_length: 5%", "not a latency or throughput metric"),
        ("[1, 2]", "mapping"),
    ):
        f.write_text(bad + "\n")
        with pytest.raises(ConfigError, match=why):
            load_floors(f)


@pytest.mark.slow
def test_the_noise_floor_flag_replaces_the_default(tmp_path):
    """A floor measured on a quieter machine (+50% for e2e): the same 2.4x slow-down is past
    (1 + 10%) x 1.5 and fails, naming the file; without the flag it is inconclusive."""
    base, cand = make_run(tmp_path / "base", [1.0]), make_run(tmp_path / "busy", [2.4])
    floors = tmp_path / "floors.yaml"
    floors.write_text("e2e_p50_ms: +50%\n")
    code, data, out = cli(base, cand, tmp_path, GATE)
    assert code == 3, out
    compare = [sys.executable, "-m", "specbench", "compare", str(base), str(cand), "--noise-floor", str(floors)]
    r = subprocess.run([*compare, "--gate", GATE, "--resamples", "500"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"beyond the noise floor of e2e_p50_ms, +50% (from {floors})" in r.stdout.replace("\n", "")
    floors.write_text("e2e_p50_ms: -50%\n")
    r = subprocess.run(compare, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "is not a floor" in r.stdout + r.stderr

"""compare_sides on run directories built from simulated counts with known truth."""

from __future__ import annotations

import math

import pytest

from specbench.cli.exits import compare_exit
from specbench.compare import DEFAULT_GATES, compare_sides, load_side, parse_gate
from specbench.io import load_json
from specbench.testing.simruns import P

ON = {"mla": "on", "output_norm": "on"}
OFF = {"mla": "on", "output_norm": "off"}
DEFAULT = [parse_gate(g) for g in DEFAULT_GATES]


def _cells(p_off, units=40, drafts=25, **extra):
    return [
        {"axes": ON, "p": P, "units": units, "drafts": drafts, **extra},
        {"axes": OFF, "p": p_off, "units": units, "drafts": drafts, **extra},
    ]


def _rows(comp, cell):
    return {r.name: r for c in comp.cells if c.name == cell for r in c.rows}


def test_identical_runs_all_tilde(make_run):
    base = make_run("base", _cells(P, ttft_ms=(50, 5)), seed=3)
    cand = make_run("cand", _cells(P, ttft_ms=(50, 5)), seed=3)
    comp = compare_sides(load_side(base), load_side(cand), DEFAULT)
    # 40 requests cannot see 3% / 2pp: no failure, and the passes are weak (exit 3, issue 37)
    assert not comp.failures and all(g.undecided for g in comp.inconclusive) and len(comp.cells) == 2
    rows = [r for c in comp.cells for r in c.rows]
    assert {r.verdict for r in rows} == {"~"} and all(r.delta == 0 for r in rows)
    assert {r.name for r in rows} >= {"mean_acceptance_length", "per_position[2]", "conditional[1]", "ttft_p50_ms"}
    # itl_s is a list of gaps per request (our driver): its per-request mean, in ms
    assert next(r for r in rows if r.name == "itl_p50_ms").base == pytest.approx(10.0)


def test_real_drop_fails_naming_cell_and_metric(make_run):
    base = make_run("base", _cells(P), seed=1)
    cand = make_run("cand", _cells([0.60, 0.40, 0.20]), seed=2)
    comp = compare_sides(load_side(base), load_side(cand), DEFAULT)
    assert compare_exit(comp) == 1
    failed = {(g.cell, g.metric) for g in comp.failures}
    assert ("mla=on, output_norm=off", "per_position[0]") in failed
    assert ("mla=on, output_norm=off", "mean_acceptance_length") in failed
    assert all(g.cell == "mla=on, output_norm=off" for g in comp.failures)


def test_point_estimates_match_the_files(make_run):
    """Deltas against sums computed straight from acceptance.json, not through the analysis code."""
    base = make_run("base", _cells(P), seed=1)
    cand = make_run("cand", _cells([0.70, 0.50, 0.30]), seed=2)
    comp = compare_sides(load_side(base), load_side(cand), DEFAULT)

    def raw(run, cid):
        units = load_json(run / cid / "acceptance.json")["per_request"]["units"]
        d = sum(u["num_drafts"] for u in units)
        return 1 + sum(u["accepted_tokens"] for u in units) / d, sum(u["accepted_per_position"][1] for u in units) / d

    al_b, p1_b = raw(base, "mla-on__output_norm-off__r0")
    al_c, p1_c = raw(cand, "mla-on__output_norm-off__r0")
    rows = _rows(comp, "mla=on, output_norm=off")
    assert rows["mean_acceptance_length"].delta == pytest.approx(al_c - al_b)
    assert rows["per_position[1]"].base == pytest.approx(p1_b)
    assert rows["per_position[1]"].cand == pytest.approx(p1_c)


def test_ci_width_matches_binomial_theory(make_run):
    """Without request spread, drafts are independent: the bootstrap CI of the p0 delta must be
    close to the normal approximation 2 * 1.96 * sqrt(p(1-p)/N_b + p(1-p)/N_c)."""
    base = make_run("base", _cells(P, units=100, drafts=40), seed=5)
    cand = make_run("cand", _cells(P, units=100, drafts=40), seed=6)
    comp = compare_sides(load_side(base), load_side(cand), DEFAULT, n_resamples=4000)
    row = _rows(comp, "mla=on, output_norm=on")["per_position[0]"]
    n = 100 * 40
    theory = 2 * 1.96 * math.sqrt(2 * P[0] * (1 - P[0]) / n)
    assert row.ci[1] - row.ci[0] == pytest.approx(theory, rel=0.12)


def test_noise_only_passes(make_run):
    """Same truth, different seeds, request-level spread: the default gates never fire on noise."""
    for seed in range(5):
        base = make_run(f"b{seed}", _cells(P, spread=0.4), seed=100 + seed)
        cand = make_run(f"c{seed}", _cells(P, spread=0.4), seed=200 + seed)
        comp = compare_sides(load_side(base), load_side(cand), DEFAULT, n_resamples=1000)
        assert not comp.failures, [g.message for g in comp.failures]  # 40 requests: passes or undecided, no fail


def test_repeats_pooled_and_one_sided_cells_reported(make_run):
    base = make_run(
        "base",
        [
            {"axes": ON, "p": P, "units": 10, "drafts": 20, "repeat": 0},
            {"axes": ON, "p": P, "units": 10, "drafts": 20, "repeat": 1},
            {"axes": OFF, "p": P, "units": 10, "drafts": 20},
        ],
    )
    cand = make_run(
        "cand",
        [
            {"axes": ON, "p": P, "units": 10, "drafts": 20},
            {"axes": {"mla": "off", "output_norm": "on"}, "p": P, "units": 10, "drafts": 20},
        ],
    )
    comp = compare_sides(load_side(base), load_side(cand), DEFAULT)
    assert [c.name for c in comp.cells if not c.missing] == ["mla=on, output_norm=on"]
    assert comp.cells[0].base_ids == ["mla-on__output_norm-on__r0", "mla-on__output_norm-on__r1"]
    assert comp.cells[0].base_units == 20 and comp.cells[0].cand_units == 10
    assert comp.only_base == ["mla=on, output_norm=off"] and comp.only_cand == ["mla=off, output_norm=on"]
    # a cell on one side only cannot pass a gate: every gate that selects it is inconclusive
    one_sided = {(g.cell, g.gate) for g in comp.inconclusive if not g.undecided}
    assert one_sided == {(c, g) for c in ("mla=on, output_norm=off", "mla=off, output_norm=on") for g in DEFAULT_GATES}
    assert compare_exit(comp) == 3


def test_failed_cell_is_reported_not_compared(make_run):
    base = make_run("base", _cells(P))
    cand = make_run(
        "cand",
        [
            {"axes": ON, "p": P, "units": 10, "drafts": 20},
            {"axes": OFF, "p": P, "units": 10, "drafts": 20, "status": "failed", "reason": "server died"},
        ],
    )
    comp = compare_sides(load_side(base), load_side(cand), DEFAULT)
    assert comp.only_base == ["mla=on, output_norm=off"]
    assert any("server died" in w for w in comp.warnings)
    assert compare_exit(comp) == 3 and not comp.failures
    missing = [g for g in comp.inconclusive if not g.undecided]  # the other cell's checks are weak (10 requests)
    assert {g.cell for g in missing} == {"mla=on, output_norm=off"}
    assert all("failed in the candidate" in g.message and "server died" in g.message for g in missing)


def test_latency_gate_direction(make_run):
    """One repeat a side: a latency check is within-run only; +40% is inside the TTFT noise floor
    (+250%) and inconclusive, 5x is past (1 + 10%) x 3.5 and fails; the reverse is better."""
    base = make_run("base", [{"axes": ON, "p": P, "units": 60, "drafts": 10, "ttft_ms": (50, 2)}], seed=1)
    cand = make_run("cand", [{"axes": ON, "p": P, "units": 60, "drafts": 10, "ttft_ms": (250, 2)}], seed=2)
    bit = make_run("bit", [{"axes": ON, "p": P, "units": 60, "drafts": 10, "ttft_ms": (70, 2)}], seed=2)
    gate = [parse_gate("ttft_p50_ms:+10%")]
    slower = compare_sides(load_side(base), load_side(cand), gate)
    assert [(g.metric, g.status, g.scope) for g in slower.failures] == [("ttft_p50_ms", "fail", "within-run only")]
    a_bit = compare_sides(load_side(base), load_side(bit), gate)
    assert compare_exit(a_bit) == 3 and "within-run only" in a_bit.inconclusive[0].message
    faster = compare_sides(load_side(cand), load_side(base), gate)  # within-run only: never a pass
    assert compare_exit(faster) == 3 and _rows(faster, "mla=on, output_norm=on")["ttft_p50_ms"].verdict == "better"


def test_gate_selector_limits_cells(make_run):
    base = make_run("base", _cells(P), seed=1)
    cand = make_run("cand", _cells([0.60, 0.40, 0.20]), seed=2)
    only_on = [parse_gate("per_position[0]:-2pp", cells={"output_norm": True})]  # YAML's `on`
    comp = compare_sides(load_side(base), load_side(cand), only_on)
    assert not comp.failures and {g.cell for g in comp.checks} == {"mla=on, output_norm=on"}


def test_cells_that_ran_together_or_on_other_hosts_are_warned(make_run):
    import json

    from specbench.compare.sides import load_side

    cells = [{"axes": {"mla": m}, "p": P, "units": 5, "drafts": 20} for m in ("on", "off")]
    run = make_run("ray", cells, manifest={"cell_hosts": {"mla-on__r0": "n1", "mla-off__r0": "n1"}})
    spans = {
        "mla-on__r0": ("2026-12-03T06:00:00+00:00", "2026-12-03T06:02:00+00:00"),
        "mla-off__r0": ("2026-12-03T06:01:00+00:00", "2026-12-03T06:03:00+00:00"),
    }
    for cid, (start, end) in spans.items():
        p = run / cid / "cell.json"
        p.write_text(json.dumps({**json.loads(p.read_text()), "started_at": start, "ended_at": end}))
    (w,) = load_side(run).warnings
    assert "ran at the same time on one host (mla-on__r0 + mla-off__r0)" in w
    # one after the other (the local executor) is not warned; different hosts are
    p = run / "mla-off__r0" / "cell.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), "started_at": "2026-12-03T06:02:00+00:00"}))
    assert load_side(run).warnings == []
    m = json.loads((run / "manifest.json").read_text())
    m["cell_hosts"]["mla-off__r0"] = "n2"
    (run / "manifest.json").write_text(json.dumps(m))
    (w,) = load_side(run).warnings
    assert "different hosts" in w

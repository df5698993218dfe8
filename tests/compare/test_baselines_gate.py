"""Every committed baseline can gate (issue 37): attested by the servers that ran it, so a compare
against it decides its checks instead of calling each one "not attested". The runs under
results/reruns/ predate attestation and are kept as rerun evidence, not as baselines."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.compare import compare_sides, load_side, parse_gate

ROOT = Path(__file__).resolve().parents[2]
BASELINES = sorted(p for p in (ROOT / "results" / "baselines").iterdir() if (p / "manifest.json").is_file())


@pytest.mark.heavy
@pytest.mark.parametrize("run", BASELINES, ids=[p.name for p in BASELINES])
def test_every_committed_baseline_is_attested_and_gates(run):
    side = load_side(run)
    comp = compare_sides(side, side, [parse_gate("acceptance_length:-50%")], n_resamples=100)
    messages = [g.message for cell in comp.cells for g in cell.gates]
    assert messages and not [m for m in messages if "not attested" in m], messages[:3]
    assert all(g.status in ("pass", "inconclusive") for cell in comp.cells for g in cell.gates)


def test_the_older_runs_are_the_unattested_ones():
    """The control: the same check against a pre-attestation run is inconclusive, "not attested"."""
    side = load_side(ROOT / "results" / "reruns" / "k-sweep-2026-12-03")
    comp = compare_sides(side, side, [parse_gate("acceptance_length:-50%")], n_resamples=100)
    assert all(g.status == "inconclusive" and "not attested" in g.message for cell in comp.cells for g in cell.gates)

"""A candidate whose speculation is off (issue 29): no drafts where the baseline drafted is a
failure (exit 1) with that reason, not inconclusive. Copies of the committed CPU baseline."""

from __future__ import annotations

import json
from pathlib import Path

from realruns import BASELINE, SPEC_CELLS, run

from specbench.records.files import NO_SPEC_COUNTS

ZERO = {"num_drafts": 0, "draft_tokens": 0, "accepted_tokens": 0, "accepted_per_position": [0, 0, 0]}


def _no_drafts(cell_dir: Path) -> None:
    """The load ran, every request finished, no source counted a draft."""
    f = cell_dir / "requests.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    f.write_text(
        "".join(
            json.dumps(
                {
                    **r,
                    "spec_decode": {
                        **r["spec_decode"],
                        **ZERO,
                        "acceptance_histogram": None,
                        "per_step_accepted": [],
                        "per_step_drafted": [],
                    },
                }
            )
            + "\n"
            for r in rows
        )
    )
    acc = json.loads((cell_dir / "acceptance.json").read_text())
    acc["prometheus"]["counts"].update(ZERO)
    acc["logs"] = {"counts": None, "windows": []}
    acc["per_request"]["counts"].update(ZERO)
    for u in acc["per_request"]["units"]:
        u.update(ZERO)
    acc["derived"], acc["ci"] = {}, None
    (cell_dir / "acceptance.json").write_text(json.dumps(acc))


def test_a_candidate_that_made_no_drafts_fails(copy, tmp_path):
    """Was exit 3 (exit 0 with --allow-inconclusive): "acceptance measured only on the baseline"."""
    for cid in SPEC_CELLS:
        _no_drafts(copy / cid)
    js = tmp_path / "r.json"
    code, out = run(BASELINE, copy, "--json", js, "--allow-inconclusive")
    assert code == 1, out
    data = json.loads(js.read_text())
    assert data["checks"] == {"pass": 0, "fail": 24, "inconclusive": 0, "cannot_fail": 0}  # AL + 3 positions in 6 cells
    assert "speculation off in the candidate: 0 drafts over 20 finished requests" in out
    assert "where the baseline made 471 drafts" in out
    al = next(
        m
        for c in data["cells"]
        if c["base_ids"] == [SPEC_CELLS[0]]
        for m in c["metrics"]
        if m["name"] == "mean_acceptance_length"
    )
    assert al["cand"] == 1.0 and al["verdict"] == "worse"


def test_a_cell_that_failed_for_lack_of_drafts_fails(copy):
    """The runner fails a cell whose /metrics shows no drafts after its load: against a baseline
    that drafted, that is a regression, not a cell that could not be measured."""
    for cid in SPEC_CELLS:
        f = copy / cid / "cell.json"
        f.write_text(json.dumps({**json.loads(f.read_text()), "status": "failed", "reason": NO_SPEC_COUNTS}))
    code, out = run(BASELINE, copy)
    assert code == 1, out
    assert "speculation off in the candidate: the cell's load finished but /metrics showed no drafts" in out


def test_a_cell_that_failed_otherwise_stays_inconclusive(copy):
    for cid in SPEC_CELLS:
        f = copy / cid / "cell.json"
        f.write_text(json.dumps({**json.loads(f.read_text()), "status": "failed", "reason": "server died"}))
    assert run(BASELINE, copy)[0] == 3


def _no_drafts_no_units(cell_dir: Path) -> None:
    """The load finished, per-request acceptance absent, /metrics present and counting 0 drafts;
    vLLM attested a server without speculation (so no k and no head variant either)."""
    f = cell_dir / "requests.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    f.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "spec_decode"}) + "\n" for r in rows))
    acc = json.loads((cell_dir / "acceptance.json").read_text())
    acc["prometheus"]["counts"].update(ZERO)
    acc["logs"], acc["per_request"] = {"counts": None, "windows": []}, None
    acc["derived"], acc["ci"] = {}, None
    (cell_dir / "acceptance.json").write_text(json.dumps(acc))
    f = cell_dir / "cell.json"
    cell = json.loads(f.read_text())
    cell["attested"].update(speculation=False, spec_method=None, num_speculative_tokens=None, head_variant=None)
    f.write_text(json.dumps(cell))


def test_speculation_off_without_per_request_units_fails(copy, tmp_path):
    """Issue 37: exit 3, "no verdict from a point estimate (speculation off in the candidate)": the
    unattested k and head variant of a server that did not speculate outranked the failure."""
    for cid in SPEC_CELLS:
        _no_drafts_no_units(copy / cid)
    js = tmp_path / "r.json"
    code, out = run(BASELINE, copy, "--json", js)
    assert code == 1, out
    data = json.loads(js.read_text())
    assert data["checks"] == {"pass": 0, "fail": 24, "inconclusive": 0, "cannot_fail": 0}
    assert "speculation off in the candidate: 0 drafts over 20 finished requests" in out
    assert "no verdict from a point estimate" not in out
    notes = [n for c in data["cells"] for g in c["gates"] for n in g["notes"]]
    assert notes and all(n.startswith("also: not attested") for n in notes)  # named, not hidden

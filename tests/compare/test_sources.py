"""Acceptance sources that disagree (issue 29): when acceptance.json records that the per-request
counts and the /metrics diff differ, the cell's checks are inconclusive with both figures shown."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from realruns import BASELINE, run

CELL = "mla-on__output_norm-on__r0"


def _per_request_regressed(cell_dir: Path, scale: float) -> None:
    """Scale every request's accepted counts (requests.jsonl and acceptance.json's units); the
    /metrics diff stays as it was, and the record says the two disagree, as the runner writes it."""
    f = cell_dir / "requests.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    acc = json.loads((cell_dir / "acceptance.json").read_text())
    for r, u in zip(rows, acc["per_request"]["units"]):
        pos = [int(x * scale) for x in u["accepted_per_position"]]
        for sd in (r["spec_decode"], u):
            sd.update(accepted_per_position=pos, accepted_tokens=sum(pos))
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    units = acc["per_request"]["units"]
    req = acc["per_request"]["counts"]
    req.update(
        accepted_tokens=sum(u["accepted_tokens"] for u in units),
        accepted_per_position=[sum(u["accepted_per_position"][i] for u in units) for i in range(3)],
    )
    prom = acc["prometheus"]["counts"]
    acc["agreement"] = {
        "logs_vs_prometheus": True,
        "per_request_vs_prometheus": False,
        "details": {"per_request": {k: [req[k], prom[k]] for k in ("accepted_tokens", "accepted_per_position")}},
    }
    (cell_dir / "acceptance.json").write_text(json.dumps(acc))


@pytest.mark.heavy
def test_disagreeing_sources_are_inconclusive_with_both_figures(tmp_path):
    """Per-request counts regressed by ~0.45 AL while /metrics did not: was exit 0 (the point from
    /metrics, a warning). Now every check of the cell is inconclusive, the others decide."""
    cand = tmp_path / "cand"
    shutil.copytree(BASELINE, cand, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    _per_request_regressed(cand / CELL, 0.75)
    js = tmp_path / "r.json"
    code, out = run(BASELINE, cand, "--gate", "acceptance_length:-3%", "--gate", "ttft_p50_ms:+50%", "--json", js)
    assert code == 3, out
    data = json.loads(js.read_text())
    cell = next(c for c in data["cells"] if c["base_ids"] == [CELL])
    assert [g["status"] for g in cell["gates"]] == ["inconclusive", "inconclusive"]
    (why,) = cell["blocked"]
    assert "acceptance sources disagree beyond rounding" in why
    # both figures, recomputed here from the files: the altered per-request sums and the untouched /metrics
    acc = json.loads((cand / CELL / "acceptance.json").read_text())
    req, prom = acc["per_request"]["counts"], acc["prometheus"]["counts"]
    req_al, prom_al = 1 + req["accepted_tokens"] / req["num_drafts"], 1 + prom["accepted_tokens"] / prom["num_drafts"]
    assert prom_al - req_al > 0.4
    assert f"candidate: {CELL}: per-request counts AL {req_al:.3f}" in why
    assert f"/metrics AL {prom_al:.3f}, {prom['num_drafts']} drafts, {prom['accepted_tokens']} accepted" in why
    assert f"per-request counts AL {req_al:.3f}" in out and f"/metrics AL {prom_al:.3f}" in out
    others = [g for c in data["cells"] if c["base_ids"] != [CELL] for g in c["gates"]]
    # the untouched cells' checks pass their intervals; 20 prompts cannot see 3%: weak (issue 37)
    assert others and all(g["status"] == "inconclusive" and g["undecided"] for g in others)

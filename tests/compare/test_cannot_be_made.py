"""A check that cannot be made is inconclusive with its reason, and counted, never dropped (issue
37, item 3): a candidate cell attested at k = 2 against a baseline at k = 3 had its p_2 check
vanish ("runs differ: k 3 vs 2", exit 0, "5 passed"). Copies of the committed CPU baseline."""

from __future__ import annotations

import json

import pytest
from realruns import BASELINE, SPEC_CELLS, copy_run, run
from rewrite import rewrite, shorter

CELL = SPEC_CELLS[0]  # mla=on, output_norm=on


@pytest.mark.heavy
def test_a_position_one_side_lacks_is_an_inconclusive_check(tmp_path):
    cand = rewrite(copy_run(tmp_path / "cand"), [CELL], shorter(2), k=2)
    js = tmp_path / "r.json"
    code, out = run(BASELINE, cand, "--gate", "per_position[2]:-2pp", "--json", js, "--allow-inconclusive", "--verbose")
    assert code == 0, out  # --allow-inconclusive
    data = json.loads(js.read_text())
    (check,) = [g for c in data["cells"] if c["base_ids"] == [CELL] for g in c["gates"]]
    assert check["status"] == "inconclusive" and check["metric"] == "per_position[2]"
    assert "position 2 exists on one side only (baseline k = 3, candidate k = 2)" in check["message"]
    assert data["checks"]["inconclusive"] >= 1 and sum(data["checks"].values()) == 6  # one check per cell
    assert "INCONCLUSIVE mla=on, output_norm=on: per_position[2]" in out


def test_every_position_of_a_star_gate_is_a_check_on_the_larger_k(tmp_path):
    cand = rewrite(copy_run(tmp_path / "cand"), [CELL], shorter(2), k=2)
    js = tmp_path / "r.json"
    run(BASELINE, cand, "--gate", "per_position[*]:-2pp", "--gate", "conditional[*]:-50pp", "--json", js)
    data = json.loads(js.read_text())
    (cell,) = [c for c in data["cells"] if c["base_ids"] == [CELL]]
    status = {g["metric"]: g["status"] for g in cell["gates"]}
    assert set(status) == {f"{m}[{i}]" for m in ("per_position", "conditional") for i in range(3)}
    assert status["per_position[2]"] == status["conditional[2]"] == "inconclusive"
    assert sum(data["checks"].values()) == 6 * 6  # 3 positions x 2 gates in each of 6 cells: none dropped

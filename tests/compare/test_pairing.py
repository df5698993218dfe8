"""Pairing by prompt (specbench/compare/pairing.py) on copies of the committed CPU baseline.

Issue-29 reproducers: a prompt missing on one side was counted as zeros there, so 12 bit-identical
prompts plus 8 errored ones read as a regression, and disjoint prompt sets were labelled paired.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from realruns import BASELINE, SPEC_CELLS, run


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _edit_requests(cell_dir: Path, n_errored: int = 0, easiest: bool = True, scale: float = 1.0) -> None:
    """Error the ``n_errored`` requests with the highest (``easiest``) or lowest acceptance and scale
    every other request's accepted counts by ``scale``, as a run would record it: requests.jsonl,
    the per-request units of acceptance.json and /metrics totals of the requests that ran."""
    rows = _rows(cell_dir / "requests.jsonl")
    al = lambda r: r["spec_decode"]["accepted_tokens"] / r["spec_decode"]["num_drafts"]  # noqa: E731
    errored = {r["id"] for r in sorted(rows, key=al, reverse=easiest)[:n_errored]}
    acc = json.loads((cell_dir / "acceptance.json").read_text())
    units = []
    for r, u in zip(rows, acc["per_request"]["units"]):
        assert r["spec_decode"]["accepted_per_position"] == u["accepted_per_position"]
        if r["id"] in errored:
            r.update(error="HTTP 500: engine error", spec_decode=None, output_tokens=0)
            continue
        pos = [int(x * scale) for x in u["accepted_per_position"]]
        for sd in (r["spec_decode"], u):
            sd.update(accepted_per_position=pos, accepted_tokens=sum(pos))
        units.append(u)
    (cell_dir / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tot = {f: sum(u[f] for u in units) for f in ("num_drafts", "draft_tokens", "accepted_tokens")}
    tot["accepted_per_position"] = [sum(u["accepted_per_position"][i] for u in units) for i in range(3)]
    acc["per_request"]["units"] = units
    for src in ("per_request", "prometheus"):
        acc[src]["counts"].update(tot)
    (cell_dir / "acceptance.json").write_text(json.dumps(acc))


def test_identical_prompts_plus_errored_ones_never_read_as_worse(copy, tmp_path):
    """12 bit-identical prompts and the 8 easiest errored in the candidate: was FAIL in 6/6 cells
    (the errored prompts counted as zeros, the /metrics point over 12 prompts against 20). 8 of 20
    unmatched is beyond the 20% the pairing allows: inconclusive, saying why."""
    for cid in SPEC_CELLS:
        _edit_requests(copy / cid, 8)
    js = tmp_path / "r.json"
    code, out = run(BASELINE, copy, "--json", js)
    assert code == 3, out
    data = json.loads(js.read_text())
    assert data["checks"] == {"pass": 0, "fail": 0, "inconclusive": 24, "cannot_fail": 0}
    assert "8 of the 20 baseline prompts the candidate sent have no finished request in it" in out
    assert "more than 20% of a side unmatched" in out
    for cell in data["cells"]:
        if cell["pairing"] is None:
            continue  # the no-speculation cells
        assert cell["pairing"]["shared"] == 12 and len(cell["pairing"]["only_in_baseline"]) == 8
        al = next(m for m in cell["metrics"] if m["name"] == "mean_acceptance_length")
        assert al["delta"] == 0.0 and al["verdict"] == "~"  # the 12 paired prompts are identical


def test_a_regression_with_the_hardest_prompts_errored_does_not_pass(copy):
    """Every prompt accepts 30% fewer tokens and the 8 hardest errored in the candidate: was a pass
    (the easy 12 against all 20). Not a pass now: too many prompts unmatched."""
    for cid in SPEC_CELLS:
        _edit_requests(copy / cid, 8, easiest=False, scale=0.7)
    code, out = run(BASELINE, copy)
    assert code == 3, out
    assert "more than 20% of a side unmatched" in out


@pytest.mark.heavy
def test_disjoint_prompt_sets_are_compared_unpaired_and_labelled_so(copy, tmp_path):
    for cid in SPEC_CELLS:
        f = copy / cid / "requests.jsonl"
        f.write_text("".join(json.dumps({**r, "prompt_id": "other-" + r["prompt_id"]}) + "\n" for r in _rows(f)))
    js = tmp_path / "r.json"
    # two runs with no prompt in common are different studies: one line, exit 2, unless --force (issue 57)
    code, out = run(BASELINE, copy, "--json", js)
    assert code == 2 and "different studies (no prompt in common in any cell)" in out and "--force" in out, out
    assert "\n" not in out.strip() and not js.exists()
    code, out = run(BASELINE, copy, "--json", js, "--force")
    data = json.loads(js.read_text())
    for cell in (c for c in data["cells"] if c["pairing"] is not None):
        assert cell["pairing"]["kind"] == "unpaired"
        assert cell["pairing"]["description"] == "unpaired: no prompt in common (20 vs 20 prompts)"
        al = next(m for m in cell["metrics"] if m["name"] == "mean_acceptance_length")
        assert al["method"].startswith("unpaired (no prompt in common), t (df min(n)-1)") and al["df"] == 19
        assert "paired by prompt" not in al["method"]
    # the same counts under other names: no change either way (no failure; 20 prompts see no 3% / 2pp)
    assert code == 3 and "0 failed" in out and "with an interval that straddles the tolerance)" in out, out

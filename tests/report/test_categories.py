"""Acceptance by prompt category (specbench/report/categories.py) on the committed default run."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.records.requests import requests_of
from specbench.report.baseline_pairs import analyse_run
from specbench.report.categories import category_rows, prompt_units

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
CELL = "mla-on__output_norm-on__r0"


def _rows():
    lines = (RUN / CELL / "requests.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_each_category_is_its_requests_counts_summed():
    rows = _rows()
    out, contrast = category_rows(CELL, requests_of(rows))
    assert {r.category for r in out} == {r["category"] for r in rows}
    for r in out:
        mine = [x["spec_decode"] for x in rows if x["category"] == r.category and not x.get("error")]
        drafts = sum(sd["num_drafts"] for sd in mine)
        accepted = sum(sd["accepted_tokens"] for sd in mine)
        assert abs(r.al - (1 + accepted / drafts)) < 1e-12  # AL of summed counts, never a mean of rates
        at0 = sum(sd["accepted_per_position"][0] for sd in mine)
        assert abs(r.p[0] - at0 / drafts) < 1e-12
        assert r.n_prompts == len({x["prompt_id"] for x in rows if x["category"] == r.category})
        assert r.al_ci is not None and r.al_ci[0] <= r.al <= r.al_ci[1]
    assert contrast is not None and contrast.high == max(out, key=lambda r: r.al).category
    assert contrast.low == min(out, key=lambda r: r.al).category and contrast.delta > 0


def test_a_repeated_prompt_is_one_unit():
    rows = _rows()
    doubled = rows + [dict(r, id=1000 + i) for i, r in enumerate(rows)]
    for units in prompt_units(requests_of(doubled)).values():
        for c in units.values():
            assert c.num_drafts % 2 == 0  # the repeat summed into its prompt's unit
    doubled_units, units = prompt_units(requests_of(doubled)), prompt_units(requests_of(rows))
    assert sum(len(u) for u in doubled_units.values()) == sum(len(u) for u in units.values())


def test_one_category_gives_no_split_and_report_lists_spec_cells_only():
    rows = [dict(r, category="chat") for r in _rows()]
    assert category_rows(CELL, requests_of(rows)) == ([], None)
    study = analyse_run(RUN, n_resamples=50)
    cells = {rs[0].cell for rs, _ in study.categories}
    assert cells and not any(c.startswith("baseline") for c in cells)

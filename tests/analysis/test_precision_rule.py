"""The precision stop rule (specbench/analysis/stop_rule.py) stops on the interval acceptance.json reports.

The load is the real loop (load/precision.py ``precision_load``) over the committed default study's
per-request counts (tests/load/data, a real vLLM-CPU run); acceptance.json is what run/collect.py
builds for the requests that load sent, written and read back as the runner writes it. The two
sides share no code path but ``cell_intervals`` and ``ci_units``: a rule over other units (batches,
prompts), another interval or another confidence gives other numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.analysis.rates import total
from specbench.analysis.stop_rule import MIN_REQUESTS_FLOOR, Look, ci_key, precise_enough
from specbench.io import save_json
from specbench.load.driver import LoadResult, LoadSent
from specbench.load.precision import AT_MAX_REQUESTS, REACHED, precision_load
from specbench.records.counts import Counts
from specbench.run.collect import build_acceptance, request_units

DATA = Path(__file__).parents[1] / "load" / "data" / "default_study_request_units.json"
CELLS = json.loads(DATA.read_text())["cells"]
TARGETS = {"acceptance_length": 0.15, "draft_acceptance_rate": 0.05, "p0": 0.1}


def _counts(row: list[int]) -> Counts:
    return Counts(row[0], row[1], row[2], list(row[3:]), len(row) - 3)


class _Load:
    """The parts of a study's ``load`` section precision_load reads."""

    def __init__(self, targets: dict[str, float], max_requests: int):
        self.until = type("Until", (), {"ci_half_width": targets})
        self.max_requests, self.batch, self.min_requests, self.max_error_rate = (
            max_requests,
            10,
            MIN_REQUESTS_FLOOR,
            0.0,
        )


def _drive(rows: list[list[int]], targets: dict[str, float], max_requests: int):
    """precision_load over the cell's requests, request i counting as ROWS[i % 20] under its own prompt
    (no prompt repeats, so a unit is a request on both sides); the scrape is the cumulative /metrics."""
    sent: list[Counts] = []

    def load_batch(start: int, n: int) -> LoadResult:
        reqs = []
        for i in range(start, start + n):
            c = _counts(rows[i % len(rows)])
            sent.append(c)
            reqs.append({"id": i, "prompt_id": f"q{i}", "start_s": 0.0, "error": None, "spec_decode": c.to_dict()})
        return LoadResult(requests=reqs, started_at="t", duration_s=1.0, sent=LoadSent(num_requests=n))

    result, record = precision_load(_Load(targets, max_requests), load_batch, lambda: total(sent) if sent else None)
    return result, record, total(sent)


@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize(
    "targets, max_requests",
    # stopped by the rule, or cut by the cap (the last case everywhere)
    [(TARGETS, 25), (TARGETS, 200), ({"acceptance_length": 0.08}, 120), ({"acceptance_length": 0.03, "p1": 0.02}, 50)],
)
def test_stop_rule_half_width_is_acceptance_json_s_interval(cell, targets, max_requests, tmp_path):
    result, prec, prom = _drive(CELLS[cell], targets, max_requests)
    acc = build_acceptance(
        num_spec_tokens=prom.num_spec_tokens,
        prom=prom,
        windows=[],
        window_warnings=[],
        req_units=request_units(result.requests),
        per_request_mode="auto",
    )
    save_json(tmp_path / "acceptance.json", acc.dump())
    written = json.loads((tmp_path / "acceptance.json").read_text())
    ci, point = written["ci"], written["derived"]
    assert (prec["unit"], prec["n_units"], prec["confidence"]) == (ci["unit"], ci["n_units"], ci["confidence"])
    assert prec["interval"] == ci["method"]  # cell.json names the interval acceptance.json has
    for metric, reached in prec["half_widths"].items():
        key = ci_key(metric)
        lo, hi = ci["intervals"][key]
        p = point["per_position"][int(key[1:])] if key.startswith("p") else point[key]
        assert reached == pytest.approx(max(hi - p, p - lo), rel=1e-12), (cell, metric)
    widths = prec["half_widths"]
    if prec["reason"] == REACHED:
        assert all(widths[m] <= t for m, t in targets.items()), widths
    else:
        assert prec["reason"] == AT_MAX_REQUESTS and prec["requests_sent"] == max_requests
        assert any(widths[m] > t for m, t in targets.items()), widths


def test_the_rule_reads_widths_only_and_needs_every_target():
    targets = {"mean_acceptance_length": 0.1, "p0": 0.05}
    assert precise_enough(Look(30, 30, {"mean_acceptance_length": 0.1, "p0": 0.05}), targets)
    assert not precise_enough(Look(30, 30, {"mean_acceptance_length": 0.1, "p0": 0.0501}), targets)
    assert not precise_enough(Look(30, 30, {"mean_acceptance_length": 0.01, "p0": None}), targets)
    assert not precise_enough(Look(30, 30, {"mean_acceptance_length": 0.01}), targets)
    assert not precise_enough(Look(30, 30, {"mean_acceptance_length": float("nan"), "p0": 0.01}), targets)
    # the point estimate does not enter: the same widths with another point give the same answer
    assert precise_enough(Look(30, 30, {"mean_acceptance_length": 0.1, "p0": 0.05}, {"p0": 0.0}), targets)

"""The precision-driven load loop (specbench/load/precision.py) and its config, without vLLM.

Batches come from the committed default study's per-request counts (tests/load/data); the real
loop against a real server is tests/load/test_precision_vllm.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.analysis.stop_rule import half_widths
from specbench.config import parse_study
from specbench.errors import ConfigError
from specbench.load.driver import LoadResult, LoadSent
from specbench.load.precision import AT_MAX_REQUESTS, ERRORS, REACHED, Batch, precision_load, run_until
from specbench.records.counts import Counts

DATA = Path(__file__).parent / "data" / "default_study_request_units.json"
ROWS = json.loads(DATA.read_text())["cells"]["mla-on__output_norm-off__r0"]


def unit(row) -> Counts:
    return Counts(row[0], row[1], row[2], list(row[3:]), 3)


def sender(prompts: int | None = None, error_from: int | None = None, per_request: bool = True):
    """send(start, n): request i is ROWS[i % 20] with prompt id i % prompts (repeats when prompts < i)."""
    calls = []

    def send(start: int, n: int) -> Batch:
        calls.append((start, n))
        reqs = [
            {"id": i, "error": "HTTP 500" if error_from is not None and i >= error_from else None}
            for i in range(start, start + n)
        ]
        units = [
            (f"p{i % (prompts or 10**9)}", unit(ROWS[i % len(ROWS)]))
            for i in range(start, start + n)
            if not reqs[i - start]["error"]
        ]
        scrape = sum((unit(ROWS[i % len(ROWS)]) for i in range(start, start + n)), Counts(0, 0, 0, [0, 0, 0], 3))
        return Batch(reqs, units if per_request else None, scrape)

    return send, calls


def test_stops_when_the_half_width_is_reached_and_records_it():
    send, calls = sender()
    _, out = run_until(send, {"acceptance_length": 0.2}, max_requests=200, batch=5, min_requests=10)
    assert out.reason == REACHED
    assert calls[0] == (0, 10) and all(n == 5 for _, n in calls[1:])  # first look after min_requests
    assert out.requests_sent == sum(n for _, n in calls) == out.looks[-1].requests
    assert out.half_widths["acceptance_length"] <= 0.2 < out.looks[-2].half_widths["acceptance_length"]
    assert out.unit == "request" and out.n_units == out.requests_sent


def test_stops_at_max_requests_cutting_the_last_batch():
    send, calls = sender()
    _, out = run_until(send, {"acceptance_length": 0.001, "p0": 0.5}, max_requests=27, batch=10, min_requests=20)
    assert out.reason == AT_MAX_REQUESTS and out.requests_sent == 27 and calls[-1] == (20, 7)
    assert out.half_widths["acceptance_length"] > 0.001


def test_stops_on_errors_above_the_allowed_rate():
    send, _ = sender(error_from=25)
    _, out = run_until(
        send, {"acceptance_length": 0.001}, max_requests=100, batch=10, min_requests=20, max_error_rate=0.1
    )
    assert out.reason == ERRORS and out.requests_sent == 30  # 5 of 30 failed > 10%


def test_repeated_prompts_are_one_unit():
    """At temperature 0 a repeated prompt repeats its counts: it must not shrink the CI as if new."""
    send, _ = sender(prompts=8)
    _, out = run_until(send, {"acceptance_length": 0.001}, max_requests=40, batch=10, min_requests=20)
    assert out.unit == "prompt" and out.n_units == 8


def test_without_per_request_counts_each_batch_is_a_unit():
    send, _ = sender(per_request=False)
    _, out = run_until(send, {"acceptance_length": 0.001}, max_requests=50, batch=10, min_requests=20)
    assert out.unit == "batch" and out.n_units == 4  # 20 + 10 + 10 + 10
    assert out.looks[0].half_widths["acceptance_length"] is None  # one batch: no interval yet


def test_half_width_is_the_per_cell_interval_s_longer_side():
    """The stop rule reads the per-cell interval (analysis/intervals.py ``cell_intervals``): checked by
    hand for AL, the Wilson score interval of DAR with the design effect from the jackknife over
    the units plus pseudo-units at 0 and 1, scaled by drafted tokens per draft."""
    import math

    from scipy.stats import t

    from specbench.analysis.intervals import PSEUDO_UNITS_UP_TO

    units = [unit(r) for r in ROWS]
    (h,) = half_widths(units, ["mean_acceptance_length"])[0].values()
    d = [u.num_drafts for u in units]
    x = [float(u.accepted_tokens) for u in units]
    y = [float(u.draft_tokens) for u in units]
    size = sum(y) / len(y) * min(1.0, PSEUDO_UNITS_UP_TO / len(y))
    xa, ya = x + [0.0, size], y + [size, size]
    loo = [(sum(xa) - xi) / (sum(ya) - yi) for xi, yi in zip(xa, ya)]
    mean = sum(loo) / len(loo)
    var_units = (len(loo) - 1) / len(loo) * sum((v - mean) ** 2 for v in loo)
    q, trials = sum(x) / sum(y), sum(y)
    shrunk = (sum(x) + size) / (trials + 2 * size)
    p = [sum(u.accepted_per_position[i] for u in units) / sum(d) for i in range(len(units[0].accepted_per_position))]
    r = trials / sum(d)
    var_draft = (sum((2 * i + 1) * pi for i, pi in enumerate(p)) - sum(p) ** 2) / r**2 / sum(d)
    binom = shrunk * (1 - shrunk) / trials
    n_eff = trials / max(1.0, var_units / binom, var_draft / binom)
    c = t.ppf(0.975, len(units) - 1)
    den = 1 + c * c / n_eff
    mid, w = (q + c * c / (2 * n_eff)) / den, c / den * math.sqrt(q * (1 - q) / n_eff + c * c / (4 * n_eff**2))
    assert h == pytest.approx(r * max(mid + w - q, q - (mid - w)), rel=1e-9)


def test_precision_load_merges_batches_into_one_load():
    class Ld:
        class until:
            ci_half_width = {"acceptance_length": 0.2}

        max_requests, batch, min_requests, max_error_rate = 100, 5, 10, 0.0

    scrapes = iter(range(1000))

    def load_batch(start, n):
        reqs = [
            {"id": i, "prompt_id": f"q{i}", "start_s": 0.5, "error": None, "spec_decode": unit(ROWS[i % 20]).to_dict()}
            for i in range(start, start + n)
        ]
        return LoadResult(requests=reqs, started_at="t", duration_s=1.0, sent=LoadSent(num_requests=n))

    def scrape():
        next(scrapes)
        return None

    result, rec = precision_load(Ld, load_batch, scrape)
    assert rec["reason"] == REACHED
    assert [r["id"] for r in result.requests] == list(range(rec["requests_sent"]))
    assert result.sent.num_requests == rec["requests_sent"]
    starts = [r["start_s"] for r in result.requests]
    assert starts == sorted(starts) and starts[-1] > starts[0]  # later batches offset by when they began


BASE = {"name": "x", "serve": {"model": "fixture:target", "speculative": {"draft": "fixture:draft"}}}


@pytest.mark.parametrize(
    "load, message",
    [
        (
            {"until": {"ci_half_width": {"acceptance_lenght": 0.05}}, "max_requests": 200},
            "load.until.ci_half_width.acceptance_lenght: unknown statistic",
        ),
        (
            {"until": {"ci_half_width": {"acceptance_length": 0}}, "max_requests": 200},
            "load.until.ci_half_width.acceptance_length: the half-width must be a positive number",
        ),
        (
            {"until": {"ci_half_width": {"acceptance_length": -0.1}}, "max_requests": 200},
            "load.until.ci_half_width.acceptance_length: the half-width must be a positive number",
        ),
        ({"until": {"ci_half_width": {}}, "max_requests": 200}, "load.until.ci_half_width: name at least one"),
        ({"until": {"ci_half_width": {"acceptance_length": 0.05}}}, "load.until: needs load.max_requests"),
        (
            {"until": {"ci_half_width": {"acceptance_length": 0.05}}, "max_requests": 200, "num_requests": 50},
            "load.num_requests: remove it",
        ),
        ({"max_requests": 200}, "load.max_requests: only with load.until"),
        (
            {"until": {"ci_half_width": {"p3": 0.05}}, "max_requests": 200},
            "load.until.ci_half_width.p3: no such position",
        ),
        (
            {"until": {"ci_half_width": {"p0": 0.05}}, "max_requests": 10},
            "load.min_requests: 20 is above max_requests 10",
        ),
        (
            {"until": {"ci_half_width": {"p0": 0.05}}, "max_requests": 100, "min_requests": 5},
            "load.min_requests: 5 is below 20; stopping on the CI's width after fewer requests",
        ),
    ],
)
def test_config_errors_name_the_field(load, message):
    with pytest.raises(ConfigError) as exc:
        parse_study({**BASE, "load": load}, "c.yaml")
    assert str(exc.value).startswith(f"c.yaml: {message}"), str(exc.value)
    assert "\n" not in str(exc.value)


def test_config_accepts_a_precision_target():
    s = parse_study(
        {
            **BASE,
            "load": {
                "until": {"ci_half_width": {"acceptance_length": 0.05, "p2": 0.1}},
                "max_requests": 400,
                "batch": 8,
            },
        },
        "c.yaml",
    )
    assert s.load.until.ci_half_width == {"acceptance_length": 0.05, "p2": 0.1} and s.load.max_requests == 400

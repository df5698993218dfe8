"""Precision-driven load: send requests in batches until the stated CIs are narrow enough.

``load: {until: {ci_half_width: {acceptance_length: 0.05}}, max_requests: 400}`` replaces a guessed
``num_requests``. After each batch of ``load.batch`` requests (the first look once
``load.min_requests`` were sent) the cell's CI is computed and the load stops when every named
statistic's half-width is at most its target, or when ``max_requests`` were sent, or when more
requests failed than ``load.max_error_rate`` allows. Why it stopped, the half-widths reached and
the requests sent go to cell.json under ``precision``.

This module drives the load: when to look, how many requests to send next, which units the
requests sent so far make. The statistics (the stop rule, its interval, the first-look floor and
why) are :mod:`specbench.analysis.stop_rule`'s.

**Units**: per-request counts (vLLM ``--per-request-spec-decode-metrics``), with the requests of one
prompt summed into one unit: at temperature 0 a repeated prompt repeats its counts, so counting
repeats as independent would shrink the CI without new information. While no prompt repeats
(``max_requests`` <= the prompt set) a unit is a request, exactly as in acceptance.json
(``records.files.ci_units`` chooses, as for every CI). Without per-request counts each batch is one unit
(its /metrics diff; batches as clusters): cruder (a batch of 10 requests is one unit) and it
differs from the report's CI, which then runs over log windows; the record says ``unit: "batch"``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

from specbench.analysis.stop_rule import INTERVAL, Look, ci_key, half_widths, precise_enough
from specbench.records.cell import PrecisionLook
from specbench.records.counts import Counts
from specbench.records.files import ci_units, diff_counts, request_units
from specbench.records.requests import RequestRow

REACHED, AT_MAX_REQUESTS, ERRORS = "precision_reached", "max_requests", "errors"


@dataclass
class Batch:
    """What one batch gave: its request records, per-request units keyed by cluster (prompt id)
    or None when a request lacked per-request counts, and the /metrics diff around the batch."""

    requests: list[RequestRow]
    request_units: list[tuple[str, Counts]] | None
    scrape_diff: Counts | None = None


def clustered(batches: list[Batch]) -> tuple[list[Counts], str]:
    """The units the CI runs over: prompts (or requests) when every batch has per-request counts,
    else one unit per batch from its /metrics diff."""
    per_prompt, repeated = None, False
    if batches and all(b.request_units is not None for b in batches):
        sums: dict[str, Counts] = {}
        for b in batches:
            for key, c in b.request_units or []:
                sums[key] = sums[key] + c if key in sums else c
        repeated = sum(len(b.request_units or []) for b in batches) > len(sums)
        per_prompt = list(sums.values())
    # the batches' /metrics diffs stand where a cell has log windows: ci_units chooses, as for every CI
    units, kind = ci_units(per_prompt, [b.scrape_diff for b in batches if b.scrape_diff is not None], None)
    return units, {"request": "prompt" if repeated else "request", "window": "batch"}.get(kind, "batch")


@dataclass
class Outcome:
    reason: str
    requests_sent: int
    batches: int
    unit: str
    n_units: int
    targets: dict[str, float]  # config names -> half-width asked
    half_widths: dict[str, float | None]  # config names -> half-width reached
    looks: list[PrecisionLook]  # cell.json's precision.looks
    confidence: float = 0.95
    interval: str = INTERVAL

    def to_dict(self) -> dict[str, Any]:
        """cell.json's ``precision`` (its looks as JSON objects)."""
        return {**asdict(self), "looks": [look.dump() for look in self.looks]}


def run_until(
    send: Callable[[int, int], Batch],
    targets: dict[str, float],
    *,
    max_requests: int,
    batch: int,
    min_requests: int,
    max_error_rate: float = 0.0,
    confidence: float = 0.95,
    rule: Callable[[Look, dict[str, float]], bool] = precise_enough,
) -> tuple[list[Batch], Outcome]:
    """Call ``send(start, n)`` for consecutive batches until ``rule`` holds, the cap, or errors.

    ``targets`` use the config's names (acceptance_length, p0, ...). Batches are ``batch``
    requests, the first one ``min_requests`` (no look before), the last one cut at the cap."""
    keys = {m: ci_key(m) for m in targets}
    by_key = {keys[m]: t for m, t in targets.items()}
    batches: list[Batch] = []
    looks: list[PrecisionLook] = []
    sent = errors = 0
    reason = AT_MAX_REQUESTS
    widths: dict[str, float | None] = {k: None for k in by_key}
    unit, n_units = "request", 0
    while sent < max_requests:
        n = min(max(batch, min_requests - sent), max_requests - sent)
        b = send(sent, n)
        batches.append(b)
        sent += n
        errors += sum(1 for r in b.requests if r.get("error"))
        if errors > max_error_rate * sent:
            reason = ERRORS
            break
        units, unit = clustered(batches)
        n_units = len(units)
        widths, point = half_widths(units, list(by_key), confidence=confidence)
        looks.append(
            PrecisionLook(requests=sent, n_units=n_units, half_widths={m: _round(widths[keys[m]]) for m in targets})
        )
        if rule(Look(sent, n_units, widths, point), by_key):
            reason = REACHED
            break
    outcome = Outcome(
        reason=reason,
        requests_sent=sent,
        batches=len(batches),
        unit=unit,
        n_units=n_units,
        targets=dict(targets),
        half_widths={m: widths.get(keys[m]) for m in targets},
        looks=looks,
        confidence=confidence,
    )
    return batches, outcome


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def request_clusters(requests: list[RequestRow]) -> list[tuple[str, Counts]] | None:
    """(prompt id, counts) per successful request; None when any lacks per-request counts."""
    ok = [r for r in requests if not r.get("error")]
    units = request_units(requests)
    if units is None:
        return None
    return [(str(r.get("prompt_id", r.get("id"))), u) for r, u in zip(ok, units)]


def precision_load(
    ld: Any, load_batch: Callable[[int, int], Any], scrape: Callable[[], Counts | None]
) -> tuple[Any, dict[str, Any]]:
    """The runner's entry: batches of ``load_batch(start, n)`` (a driver LoadResult each) under
    ``ld.until``; returns one merged LoadResult (as if sent at once) and cell.json's ``precision``.

    ``scrape()`` gives the cumulative /metrics counts; its diff around a batch is that batch's unit
    when the server gives no per-request counts. Between batches the load drains (a closed loop
    waits for its last request), so throughput of such a cell includes one drain per batch."""
    parts: list[tuple[float, Any]] = []
    t_first: list[float] = []

    def send(start: int, n: int) -> Batch:
        before = scrape()
        t = time.perf_counter()
        t_first[:] = t_first or [t]
        res = load_batch(start, n)
        parts.append((t - t_first[0], res))
        return Batch(res.requests, request_clusters(res.requests), diff_counts(scrape(), before))

    _, outcome = run_until(
        send,
        dict(ld.until.ci_half_width),
        max_requests=ld.max_requests,
        batch=ld.batch,
        min_requests=ld.min_requests,
        max_error_rate=ld.max_error_rate,
    )
    return merge_batches(parts, time.perf_counter() - t_first[0], outcome.requests_sent), outcome.to_dict()


def merge_batches(parts: list[tuple[float, Any]], duration_s: float, sent: int) -> Any:
    """One LoadResult from ``(offset, LoadResult)`` batches: requests in order, each timed from the
    first batch's start (also run/interleave.py's blocks)."""
    first = parts[0][1]
    requests = []
    for offset, res in parts:
        for r in res.requests:
            start = r.get("start_s")
            if start is not None:
                r["start_s"] = start + offset  # each batch timed from its own start
            requests.append(r)
    return replace(first, requests=requests, duration_s=duration_s, sent=replace(first.sent, num_requests=sent))

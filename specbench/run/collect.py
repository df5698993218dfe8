"""Collect one cell's acceptance from three independent sources and check they agree.

- Prometheus: ``/metrics`` after minus before the load, summed over engines: the exact counts.
- Logs: the SpecDecoding windows the server printed during the load (one line per stats interval,
  V1 lines reset), summed by counts; windows are restricted to lines after the 'before' scrape.
- Per request: the driver's per-request spec-decode counts, summed (when the server exposes them).

Counts must agree EXACTLY; a mismatch is recorded with its details, not hidden. Derived statistics
(AL, DAR, p_i, alpha_i) come from the Prometheus counts; the CI (score interval with a jackknife
design effect, analysis/intervals.py) is over requests when per-request data exists, else over log
windows. Pure functions: text and dicts in, dicts out.
"""

from __future__ import annotations

import math
from typing import Any

from specbench.analysis.acceptance import DEFINITION, acceptance, counts_from_records
from specbench.analysis.intervals import cell_intervals
from specbench.analysis.rates import total
from specbench.metrics.parse import parse_prometheus, parse_text
from specbench.metrics.record import SpecDecodeRecord
from specbench.records.counts import Counts, invalid_reason
from specbench.records.files import (
    CI,
    Acceptance,
    Agreement,
    CountsMismatch,
    Derived,
    PerRequest,
    Total,
    Windows,
    ci_units,
    diff_counts,
    request_units,  # noqa: F401 - re-exported: the runner and tests read it here
)

COUNT_FIELDS = ("num_drafts", "draft_tokens", "accepted_tokens", "accepted_per_position")


def prometheus_counts(text: str, file: str | None = None) -> Counts | None:
    """Cumulative spec-decode counters of one scrape, summed over engines; None if there are none."""
    recs = [r for r in parse_prometheus(text, file=file) if isinstance(r, SpecDecodeRecord)]
    return total([c for r in recs if (c := r.counts()) is not None])


def log_windows(log_text: str, after_line: int, file: str | None = None) -> tuple[list[Counts], list[str]]:
    """SpecDecoding windows printed on lines > ``after_line`` (1-based line numbers of the log)."""
    records = [r for r in parse_text(log_text, file=file) if (r.line or 0) > after_line]
    return counts_from_records(records)


def reset_problem(prom: Counts | None) -> str | None:
    """Why a /metrics diff cannot be a measurement (a counter reset gives negative counts), or None.

    compare leaves such counts out as invalid (compare/sides.py, counts.invalid_reason); the
    runner fails the cell with this reason instead of storing numbers nobody may use."""
    why = invalid_reason(prom) if prom is not None else None
    return (
        None
        if why is None
        else (
            f"/metrics diff is not a measurement ({why}): a counter went back "
            "(server restarted between the scrapes?); re-run the cell"
        )
    )


def counts_equal(a: Counts | None, b: Counts | None) -> tuple[bool, dict[str, Any]]:
    """Exact equality of the count fields; the details name each field that differs."""
    if a is None or b is None:
        return (a is None and b is None), ({} if a is None and b is None else {"missing": "a" if a is None else "b"})
    diffs = {f: [getattr(a, f), getattr(b, f)] for f in COUNT_FIELDS if getattr(a, f) != getattr(b, f)}
    return not diffs, diffs


def _finite(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def build_acceptance(
    *,
    num_spec_tokens: int | None,
    prom: Counts | None,
    windows: list[Counts],
    window_warnings: list[str],
    req_units: list[Counts] | None,
    per_request_mode: str,
) -> Acceptance:
    """The acceptance.json record (docs/contracts.md) of a speculative cell."""
    log_total = total(windows)
    logs_ok, logs_details = counts_equal(log_total, prom)
    use_req = req_units if per_request_mode != "off" else None
    req_total = total(use_req) if use_req else None
    req_ok, req_details = counts_equal(req_total, prom) if use_req else (None, {})
    derived = Derived()
    warnings = list(window_warnings)
    reset = reset_problem(prom)
    if reset:
        warnings.append(reset)  # the counts stay in the record as evidence; no figures from them
    elif prom is not None:
        acc = acceptance(prom)
        warnings += acc.warnings
        derived = Derived(
            mean_acceptance_length=_finite(acc.mean_acceptance_length),
            draft_acceptance_rate=_finite(acc.draft_acceptance_rate),
            per_position=[_finite(p) for p in acc.per_position],
            conditional=[_finite(a) for a in acc.conditional],
        )
    ci = None
    units, unit = ci_units(use_req, windows, prom)
    if units and prom is not None and prom.num_drafts and not reset:
        iv = cell_intervals(units)
        ci = CI(
            unit=unit,
            method=iv.method,
            confidence=iv.confidence,
            n_units=iv.n_units,
            degenerate=iv.degenerate,
            intervals={k: [_finite(lo), _finite(hi)] for k, (lo, hi) in iv.items()},
        )
    return Acceptance(
        definition=DEFINITION,
        num_spec_tokens=num_spec_tokens,
        prometheus=Total(counts=prom),
        logs=Windows(counts=log_total, windows=windows),
        per_request=None if not use_req else PerRequest(counts=req_total, units=use_req),
        agreement=Agreement(
            logs_vs_prometheus=logs_ok,
            per_request_vs_prometheus=req_ok,
            details={
                k: CountsMismatch.model_validate(v)
                for k, v in (("logs", logs_details), ("per_request", req_details))
                if v
            },
        ),
        derived=derived,
        ci=ci,
        warnings=warnings,
    )


def baseline_acceptance(prom_before: Counts | None, prom_after: Counts | None, windows: list[Counts]) -> Acceptance:
    """The baseline (no speculation) must show no spec-decode activity: counters absent or zero."""
    d = diff_counts(prom_after, prom_before)
    absent = prom_after is None
    zero = d is None or (d.num_drafts == 0 and d.draft_tokens == 0 and d.accepted_tokens == 0)
    reset = reset_problem(d)
    return Acceptance(
        definition=DEFINITION,
        num_spec_tokens=None,
        baseline=True,
        spec_metrics="absent" if absent else ("zero" if zero else "present"),
        baseline_ok=zero and not windows,
        prometheus=Total(counts=d),
        logs=Windows(counts=total(windows), windows=windows),
        per_request=None,
        agreement=Agreement(logs_vs_prometheus=not windows and zero, per_request_vs_prometheus=None, details={}),
        derived=Derived(),
        ci=None,
        warnings=([reset] if reset else [])
        + (
            []
            if zero and not windows
            else ["baseline cell (no speculation) shows spec-decode counts: check serve.extra_args"]
        ),
    )

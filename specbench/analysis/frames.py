"""DataFrames: one row per canonical record, and one summary row per labelled group of counts."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from specbench.analysis.intervals import cell_intervals
from specbench.analysis.rates import acceptance, total
from specbench.metrics.record import SpecDecodeRecord
from specbench.records.counts import Counts

_RECORD_COLUMNS = list(SpecDecodeRecord(source="", format="").to_dict())


def records_to_frame(records: Iterable[Any]) -> pd.DataFrame:
    """One row per spec-decode record, columns named exactly as the canonical record's keys."""
    rows = [r.to_dict() for r in records if isinstance(r, SpecDecodeRecord)]
    return pd.DataFrame(rows, columns=_RECORD_COLUMNS)


def _ci_cols(row: dict[str, Any], name: str, value: float, ci: tuple[float, float] | None) -> None:
    row[name] = value
    row[f"{name}_ci_low"], row[f"{name}_ci_high"] = ci if ci is not None else (math.nan, math.nan)


def summary_frame(
    groups: dict[str, list[Counts]],
    *,
    totals: dict[str, Counts] | None = None,
    unit: str | dict[str, str] = "window",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One row per group: pooled counts, AL, DAR, p_i, alpha_i and their CIs.

    Point estimates come from ``totals[label]`` when given (e.g. exact Prometheus counts) and from
    the sum of the group's units otherwise; the CIs always run over the units (the score interval
    with a jackknife design effect, :func:`~specbench.analysis.intervals.cell_intervals`). ``unit`` names what a unit is ("window"
    or "request"), per group when a dict. ``ci_degenerate`` marks groups with a single unit, whose
    interval is (x, x); ``ci_method`` names the interval (empty without one).
    """
    totals = totals or {}
    rows: list[dict[str, Any]] = []
    k_max = 0
    for label, units in groups.items():
        row, k = _summary_row(
            label,
            units,
            totals.get(label) or total(units),
            unit.get(label, "window") if isinstance(unit, dict) else unit,
            confidence,
        )
        k_max = max(k_max, k)
        rows.append(row)
    return pd.DataFrame(rows, columns=_summary_columns(k_max))


def _summary_row(
    label: str, units: list[Counts], pooled: Counts | None, unit: str, confidence: float
) -> tuple[dict[str, Any], int]:
    """The group's row and its number of draft positions (0 without counts)."""
    row: dict[str, Any] = {"label": label, "unit": unit, "n_units": len(units)}
    if pooled is None:
        return row, 0
    acc = acceptance(pooled)
    ci = cell_intervals(units, confidence=confidence) if units else None
    row["ci_degenerate"] = bool(ci is None or ci.degenerate)
    row["ci_method"] = "" if ci is None or ci.degenerate else ci.method  # which interval the CI columns hold
    row["num_spec_tokens"] = pooled.num_spec_tokens
    row["num_drafts"] = pooled.num_drafts
    row["draft_tokens"] = pooled.draft_tokens
    row["accepted_tokens"] = pooled.accepted_tokens
    get = (lambda key: ci.get(key)) if ci is not None else (lambda key: None)
    _ci_cols(row, "mean_acceptance_length", acc.mean_acceptance_length, get("mean_acceptance_length"))
    _ci_cols(row, "draft_acceptance_rate", acc.draft_acceptance_rate, get("draft_acceptance_rate"))
    for i, p in enumerate(acc.per_position):
        _ci_cols(row, f"p{i}", p, get(f"p{i}"))
    for i, a in enumerate(acc.conditional):
        _ci_cols(row, f"a{i}", a, get(f"a{i}"))
    row["derived"] = ", ".join(dict.fromkeys(d for u in (units or [pooled]) for d in u.derived))
    row["warnings"] = "; ".join(acc.warnings)
    return row, len(acc.per_position)


def _summary_columns(k_max: int) -> list[str]:
    head = [
        "label",
        "unit",
        "n_units",
        "ci_degenerate",
        "ci_method",
        "num_spec_tokens",
        "num_drafts",
        "draft_tokens",
        "accepted_tokens",
    ]
    stats = (
        ["mean_acceptance_length", "draft_acceptance_rate"]
        + [f"p{i}" for i in range(k_max)]
        + [f"a{i}" for i in range(k_max)]
    )
    return head + [c for s in stats for c in (s, f"{s}_ci_low", f"{s}_ci_high")] + ["derived", "warnings"]

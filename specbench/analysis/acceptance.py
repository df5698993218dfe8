"""The analysis contract (docs/contracts.md "Analysis contract") in one import.

The pieces live in small modules: :mod:`.counts` (Counts, AcceptanceStats, acceptance), :mod:`.windows`
(records -> per-window counts), :mod:`.intervals` (CIs) and :mod:`.frames` (DataFrames).
"""

from __future__ import annotations

from specbench.analysis.intervals import Intervals, bootstrap, bootstrap_delta, point_estimates, significant
from specbench.analysis.rates import DEFINITION, AcceptanceStats, acceptance, total
from specbench.analysis.windows import RateOnlySummary, counts_from_records, rate_only_summary
from specbench.records.counts import Counts

__all__ = [
    "DEFINITION",
    "AcceptanceStats",
    "Counts",
    "Intervals",
    "RateOnlySummary",
    "acceptance",
    "bootstrap",
    "bootstrap_delta",
    "counts_from_records",
    "point_estimates",
    "rate_only_summary",
    "significant",
    "total",
]

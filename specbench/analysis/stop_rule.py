"""The precision stop rule: when a cell has measured enough for its CI to be as narrow as asked.

The statistics of a precision-driven load live here; :mod:`specbench.load.precision` only drives
it (when to look, how many requests to send next, how the units are clustered).

**The interval is the per-cell CI everywhere**: :func:`specbench.analysis.intervals.cell_intervals`,
the one function acceptance.json, ``report``, ``compare`` and this rule call, over the units
``records.files.ci_units`` chooses (docs/methods.md "Counts and definitions" and "Precision-driven
load"). The rule reads its half-width, the interval's longer side (the score interval is
asymmetric), before any clip to the statistic's range: a clip at 0 or 1 is not precision.

**The rule reads only widths**, never the point estimate: a rule that stopped when the estimate
"looked good" would pick the samples that happen to look good and shift the estimate
(tests/load/test_precision_coverage.py simulates both and measures the final CI's coverage).

**A floor on the first look** (:data:`MIN_REQUESTS_FLOOR`, 20; the config refuses less): with a look
after a handful of requests a variance estimated from the units is itself noisy, the width rule
stops exactly when it happens to be small, and the final CI misses the truth far more than 5% of
the time. Simulated with the jackknife-t interval the score interval replaced, on the committed
default study's requests with a look after every request (batch 1; benchmarks/precision_coverage.py):
min_requests 2 / 5 / 10 left the final 95% CI covering as little as 77% / 84% / 89% (logits-only
cell), min_requests 20 at least 93.3% for every cell and target (1000 studies each; 30: 93.8%).
tests/load/test_precision_coverage.py keeps a seeded check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specbench.analysis.intervals import SCORE_JACKKNIFE, cell_intervals
from specbench.records.counts import Counts

# The config's statistic names -> keys of count_stats (config/ validates `until` against it;
# p0, p1, ... are count_stats keys already).
PRECISION_METRICS = {"acceptance_length": "mean_acceptance_length", "draft_acceptance_rate": "draft_acceptance_rate"}
MIN_REQUESTS_FLOOR = 20  # fewer requests before the first look break the final CI's coverage (above)
INTERVAL = SCORE_JACKKNIFE  # the method cell.json's ``precision`` names: acceptance.json's ci.method


def ci_key(metric: str) -> str:
    """The config's statistic name -> the key of the per-cell interval."""
    return PRECISION_METRICS.get(metric, metric)


@dataclass
class Look:
    """One check after a batch: requests sent so far, units, half-widths and point estimates.

    The stop rule gets the whole look but must only read ``half_widths`` (``point`` is here so the
    coverage test can show that a rule peeking at it breaks the interval)."""

    requests: int
    n_units: int
    half_widths: dict[str, float | None]
    point: dict[str, float] = field(default_factory=dict)


def precise_enough(look: Look, targets: dict[str, float]) -> bool:
    """The stop rule: every target statistic has an interval no wider than its target."""
    for key, target in targets.items():
        h = look.half_widths.get(key)
        if h is None or not h <= target:  # NaN is not narrow
            return False
    return True


def half_widths(
    units: list[Counts], keys: list[str], *, confidence: float = 0.95
) -> tuple[dict[str, float | None], dict[str, float]]:
    """({key: half-width or None}, point estimates) of the per-cell interval over ``units``
    (:func:`specbench.analysis.intervals.cell_intervals`). None below 2 units or where the
    statistic is undefined."""
    if not units:
        return {key: None for key in keys}, {}
    iv = cell_intervals(units, confidence)
    out: dict[str, float | None] = {}
    for key in keys:
        h = iv.half_width.get(key, math.nan)  # unclipped: a clip at 0 or 1 is not precision
        out[key] = None if iv.degenerate or not math.isfinite(h) else h
    return out, iv.point

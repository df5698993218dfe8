"""No float decides a verdict (issue 37, item 4).

Acceptance statistics are ratios of integer counts, computed in floats: ``alpha_1 = p_1 / p_0 =
(a_1 / D) / (a_0 / D)`` differs from ``a_1 / a_0`` in the last bit. Measured: an A/A draw at 3
prompts whose alpha_1 was identical prompt by prompt (drafts differing) failed ``conditional[1]:0``
"worse by 1.11e-16, CI of harm [1.11e-16, 1.11e-16]"; and of one cell whose every prompt dropped
alike, p_0 was "inconclusive: zero-width" while AL, p_1 and p_2 failed, as the jackknife variance
came out 0 or 1e-33. So:

- a change or an interval bound within :data:`ROUNDING` of the metric's scale (1 for fractions,
  else the larger of the two values) is 0 (:func:`snap`);
- whether every unit shows the same change, the structure behind a zero-width interval, is decided
  on the counts in exact rational arithmetic (:func:`flat_changes`), never on float noise: every
  leave-one-out change equal (paired by prompt), or every leave-one-out value equal on each side
  (unpaired). Then the interval has zero width around the change (it never decides: too few
  distinct units), or, where that change is exactly 0, it is the within-draw sampling floor's t
  interval around 0 (the interval an exact 0 always had). Every statistic with the same structure
  gets the same verdict.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from specbench.analysis.intervals import count_stats
from specbench.compare.registry import Metric

# Relative to the metric's scale: far above float rounding (1e-16), far below any change counts
# can show (one token in 1e9 drafts).
ROUNDING = 1e-9


def scale(metric: Metric, *values: float | None) -> float:
    """What "relative to the metric's scale" is relative to: 1 for fractions, else the largest value."""
    if metric.is_fraction:
        return 1.0
    return max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0) or 1.0


def snap(x: float | None, s: float) -> float | None:
    """``x``, or 0 when it is within rounding of 0 at scale ``s``."""
    return 0.0 if x is not None and abs(x) <= ROUNDING * s else x


def _exact(row: list[int], key: str) -> Fraction | None:
    """The statistic ``key`` of one row of summed counts [D, drafted, A, a_0..], exactly."""
    d, t, a = row[0], row[1], row[2]
    if key == "mean_acceptance_length":
        return 1 + Fraction(a, d) if d else None
    if key == "draft_acceptance_rate":
        return Fraction(a, t) if t else None
    i = int(key[1:])
    num, den = row[3 + i], (d if key[0] == "p" or i == 0 else row[2 + i])
    return Fraction(num, den) if den else None


def flat_changes(mb: np.ndarray, mc: np.ndarray, paired: bool, k: int) -> dict[str, bool]:
    """``{statistic: change is exactly 0}`` for the statistics whose every unit shows the same
    change, exactly: paired (rows are prompts, aligned), every leave-one-prompt-out change equal;
    unpaired, every leave-one-out value equal on each side. Float spread first (cheap); the
    rational check only where that spread is within rounding."""
    if len(mb) < 2 or len(mc) < 2 or (paired and len(mb) != len(mc)):
        return {}
    sb, sc = mb.sum(axis=0), mc.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lb, lc = count_stats(sb - mb, k), count_stats(sc - mc, k)
    out = {}
    for key in lb:
        values = [lc[key] - lb[key]] if paired else [lb[key], lc[key]]
        if not all(
            np.all(np.isfinite(v)) and np.ptp(v) <= ROUNDING * max(1.0, float(np.max(np.abs(v)))) for v in values
        ):
            continue
        flat = _flat_exact(mb, mc, key, paired)
        if flat is not None:
            out[key] = flat
    return out


def _flat_exact(mb: np.ndarray, mc: np.ndarray, key: str, paired: bool) -> bool | None:
    """None unless the leave-one-out structure is exactly flat; then whether the change is exactly 0."""
    ib, ic = mb.astype(np.int64).tolist(), mc.astype(np.int64).tolist()
    tb, tc = [sum(c) for c in zip(*ib)], [sum(c) for c in zip(*ic)]

    def loo(total: list[int], rows: list[list[int]]) -> list[Fraction | None]:
        return [_exact([t - x for t, x in zip(total, r)], key) for r in rows]

    vb, vc = loo(tb, ib), loo(tc, ic)
    if any(v is None for v in vb + vc):
        return None
    if paired:
        changes = {c - b for b, c in zip(vb, vc)}  # type: ignore[operator]
        if len(changes) != 1:
            return None
    elif len(set(vb)) != 1 or len(set(vc)) != 1:
        return None
    pb, pc = _exact(tb, key), _exact(tc, key)
    return pb is not None and pb == pc

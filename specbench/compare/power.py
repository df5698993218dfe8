"""A pass means "known to be within tolerance"; what an undecided check needs to be decided.

Every gate check has a harm (the change in the bad direction) with a two-sided interval at the
compare's confidence (95%: one-sided 2.5% at each end). After Holm (:mod:`~specbench.compare.gate_checks`):

- **fail**: the interval's lower end lies past the tolerance T (we know the harm exceeds T), at the
  per-check level and after Holm over every check of the compare (family-wise false alarms <= 2.5%).
- **pass**: the interval's upper end is at or below T (we know the harm is at most T). No correction
  is needed for a pass: the compare exits 0 only when *every* check passes, so a candidate with one
  true harm at T exits 0 only if that one check passes, which it does with probability <= 2.5%
  (an intersection-union test). This replaced issue 37's power rule (``(q + q_0.8) x SE <= T``),
  under which a check failed only when its whole interval lay past T, so a "5% gate" failed
  reliably only at about 2T and a true drop of T passed; ``--allow-weak`` went with it.
- **inconclusive**: neither: the interval straddles T. It says how many units would decide it
  (:func:`needs`): at the harm as measured, the count at which the interval's far end clears T with
  80% probability.
- **cannot fail**: the tolerance reaches the metric's worst value from the baseline's (p_2 = 0.01 in
  the baseline, a 5pp gate): no candidate can be past it. Not a fail, not counted as a pass: the
  headline counts it apart (``GateResult.cannot_fail``).
- A latency / throughput check with one repeat a side (``within-run only``, :mod:`~specbench.compare.noise`)
  can fail past its noise floor but never pass: its interval does not hold a shift of the whole run,
  so it cannot show the change is within T; 2+ repeats a side give it a between-run interval.
"""

from __future__ import annotations

import math
from dataclasses import replace

from specbench.compare.gates import POWER
from specbench.compare.noise import HINT, WITHIN
from specbench.compare.registry import Metric
from specbench.compare.verdicts import Comparison, GateResult, MetricRow, Status

# Past this many times the units a check has, "needs ~N" says only that: the change sits so close to
# the tolerance that no practical run decides it.
MAX_SCALE = 100


def largest_harm(metric: Metric, base: float) -> float:
    """The largest harm the metric's range allows from the baseline's value ``base``."""
    if metric.higher_is_better:
        return base - (1.0 if metric.name == "mean_acceptance_length" else 0.0)
    return 1.0 - base if metric.is_fraction else math.inf


def amount(metric: Metric, x: float) -> str:
    """A harm in the metric's own terms: percentage points for fractions."""
    if metric.is_fraction:
        return f"{x * 100:.3g}pp"
    unit = {"tokens": " AL", "x": "x"}.get(metric.unit, f" {metric.unit}")
    return f"{x:.4g}{unit}"


def beyond_range(g: GateResult, row: MetricRow | None) -> str:
    """Why no candidate can be past the check's tolerance (the baseline's value is within the
    tolerance of the metric's worst value: p_2 = 0 with a 5pp gate), or ""."""
    if row is None or row.base is None or g.tolerance is None:
        return ""
    largest = largest_harm(row.metric, row.base)
    if g.tolerance < largest:
        return ""
    drop = "drop" if row.metric.higher_is_better else "rise"
    return (
        f"cannot fail: no {drop} past the tolerance is possible, the baseline's {row.base:.4g} is within "
        f"{amount(row.metric, g.tolerance)} of the metric's worst value"
    )


def quantile(alpha: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha))


def needs(g: GateResult, harm: float, alpha: float, m: int) -> str:
    """``needs ~N prompts (has n)`` for a check whose interval straddles its tolerance: the units at
    which, with the harm as measured and the SE shrinking as 1/sqrt(n), the interval's far end clears
    the tolerance with :data:`POWER` probability: below it for a pass (level ``alpha``), past it for a
    fail (``alpha / m``, Holm's level for a lone harm among ``m`` checks). Normal quantiles: the t
    quantile at the units a check has now is not the one at the units it needs. Checked by resampling
    at the printed count (tests/compare/test_boundaries.py)."""
    tol, se = g.tolerance, g.se
    unit = g.unit or "units"
    if tol is None or se is None or se <= 0:
        return f"needs more {unit}"
    level = alpha if harm <= tol else alpha / max(m, 1)
    # toward a pass, a candidate that looks better is taken as unchanged: the plug-in estimate of a
    # gain at few units would promise a count at which the check decides far less than POWER
    gap = tol - max(harm, 0.0) if harm <= tol else harm - tol
    scale = ((quantile(level) + quantile(1 - POWER)) * se / gap) ** 2 if gap > 0 else math.inf
    way = "pass" if harm <= tol else "fail"
    if scale > MAX_SCALE:
        return f"its change sits at the tolerance: more than {MAX_SCALE}x the {unit} would be needed to decide it"
    if not g.units:
        return f"needs ~{scale:.1f}x the {unit} per side to {way}"
    return f"needs ~{max(math.ceil(g.units * scale), g.units + 1)} {unit} (has {g.units}) to {way}"


def judge(comp: Comparison) -> None:
    """After Holm: mark the checks that cannot fail; a within-run-only pass becomes inconclusive; every
    check whose interval straddles its tolerance says what would decide it (module docstring)."""
    alpha = (1 - comp.confidence) / 2
    m = max(comp.decided, 1) if comp.holm else 1
    for cell in comp.cells:
        rows = {r.name: r for r in cell.rows}
        cell.gates = [_judged(g, rows.get(g.metric), alpha, m) for g in cell.gates]


def _judged(g: GateResult, row: MetricRow | None, alpha: float, m: int) -> GateResult:
    if g.status != Status.PASS and not g.undecided:
        return g
    vacuous = beyond_range(g, row)
    if vacuous:  # nothing past the tolerance can happen: whatever the interval says, it guards nothing
        message = g.message.split("; not decided:")[0]
        return replace(
            g, status=Status.PASS, undecided="", cannot_fail=vacuous, message=message, notes=(vacuous, *g.notes)
        )
    reason = _undecided(g, row, alpha, m)
    if not reason:
        return g
    name, _, rest = g.message.partition(": ")
    message = f"{name}: {reason}; not a pass: {rest}" if rest else f"{name}: {reason}"
    return replace(g, undecided=reason, status=Status.INCONCLUSIVE, message=message)


def _undecided(g: GateResult, row: MetricRow | None, alpha: float, m: int) -> str:
    """Why a pass or a straddling check is not known to be within its tolerance, and what would
    decide it; "" for a pass that stands."""
    if g.scope == WITHIN:
        return (
            f"not known to be within the tolerance: {WITHIN} (one repeat a side), its interval does not hold "
            f"a shift of the whole run from machine load; {HINT}"
        )
    if g.status == Status.PASS:
        return ""
    if g.harm is None or g.harm_ci is None or g.tolerance is None:
        return g.undecided
    metric = row.metric if row is not None else None
    show = (lambda x: amount(metric, x)) if metric is not None else (lambda x: f"{x:.4g}")
    drop = "rise" if metric is not None and not metric.higher_is_better else "drop"
    lo, hi = g.harm_ci
    where = (
        f"the interval allows a {drop} of up to {show(hi)}, past {show(g.tolerance)}"
        if lo <= g.tolerance
        else f"past {show(g.tolerance)} at the per-check level, not after Holm over {m} checks"
    )
    return f"not known to be within the tolerance: {where}; {needs(g, g.harm, alpha, m)}"

"""A pass means "would have failed": checks too weak for their tolerance are not passes.

A gate check fails when the whole CI of the harm lies past its tolerance T; a check whose interval
is wide passes almost whatever the candidate did. Measured (issue 37): at 20 requests every check of
the CI recipe against the committed CPU baseline passed while it could see only drops of 10-19% AL
for a 5% gate, and a dead head (0 of 216 draft tokens accepted, AL 2.375 -> 1.000 on every prompt)
passed at 3-6 prompts: its AL interval was [1.00, 3.47], and the harm that check detects, 5.4 AL,
is more than AL can drop. So a check that passed its interval passes only when

1. **its power at the tolerance is >= 80%**: it tells a change of T from no change with >= 80%
   probability at the level the compare held it to (alpha / m, Holm over the m checks with an
   interval; alpha per check with --no-holm): ``(q_(1-alpha/m) + q_0.8) x SE <= T``. The printed
   "detects" figure (the harm it fails at with 80% probability, T plus that) is then <= 2 T. A
   within-run latency / throughput check (:mod:`~specbench.compare.noise`) fails only past its
   noise floor: its "detects" starts there, so it is held to the same 2 T;
2. **its interval is informative**: that detected harm fits inside the metric's range from the
   baseline's value (AL >= 1; fractions, throughput and speed-up >= 0; a share <= 1), and so does
   the tolerance plus how far the interval reaches below the change (a score interval is wider
   toward a candidate at the metric's bound than its SE says); else not even the worst possible
   candidate could have failed it.

A check whose tolerance reaches the metric's worst value from the baseline's (p_2 = 0 in the
baseline, a 5pp gate) guards against nothing that can happen: it passes, and says so.

Otherwise it is inconclusive, "too weak to see a drop of T: needs ~N prompts", where N scales the
units the SE rests on by the SE's 1/sqrt(n) law. ``--allow-weak`` lets a check that fails rule 1
pass, labelled in the headline, the Markdown and the JUnit; a check that fails rule 2 stays
inconclusive, since it could not have failed at all. Failures are never touched: a CI past the
tolerance is a regression whatever the power. Weakness is judged after Holm, over the family Holm
held, so turning a weak pass inconclusive changes no other check's level.
"""

from __future__ import annotations

import math
from dataclasses import replace

from specbench.compare.gates import POWER, harm_of
from specbench.compare.metrics import Metric
from specbench.compare.noise import WITHIN
from specbench.compare.results import Comparison, GateResult, MetricRow, Status


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
    tolerance of the metric's worst value: p_2 = 0 with a 5pp gate), or "". Such a check cannot
    fail, and needs not: what it guards against cannot happen."""
    if row is None or row.base is None or g.tolerance is None:
        return ""
    largest = largest_harm(row.metric, row.base)
    if g.tolerance < largest:
        return ""
    drop = "drop" if row.metric.higher_is_better else "rise"
    return (
        f"no {drop} past the tolerance is possible: the baseline's {row.base:.4g} is within "
        f"{amount(row.metric, g.tolerance)} of the metric's worst value; a pass by the metric's range"
    )


def weakness(g: GateResult, row: MetricRow | None) -> tuple[str, bool]:
    """Why a passed check cannot stand as a pass, and whether --allow-weak may pass it anyway
    (``("", True)`` when it is powered and informative)."""
    tol, mdc = g.tolerance, g.mdc
    if tol is None or mdc is None:  # every check with an interval has both: kept as a guard
        return "its power at the tolerance is unknown (no standard error): not a pass", False
    metric = row.metric if row is not None else None
    drop = "a rise" if metric is not None and not metric.higher_is_better else "a drop"
    show = (lambda x: amount(metric, x)) if metric is not None else (lambda x: f"{x:.4g}")
    head = f"too weak to see {drop} of {show(tol)}"
    sees = f"it detects {show(mdc)} with {POWER:.0%} probability at the level used"
    base = row.base if row is not None else None
    largest = largest_harm(metric, base) if metric is not None and base is not None else None
    within = g.scope == WITHIN and g.floor is not None
    fails_past = g.floor if within and g.floor is not None else tol  # a within-run check fails only past its floor
    below = _below(row)
    blind = ""  # why not even the worst possible candidate could have failed it
    if largest is not None and tol < largest and mdc > largest:
        blind = f"{sees}, more than the largest possible {drop[2:]} from the baseline's {base:.4g} ({show(largest)})"
    elif largest is not None and tol < largest and below is not None and fails_past + below >= largest:
        blind = (
            f"its interval reaches {show(below)} below its change, so not even the largest possible {drop[2:]} "
            f"from the baseline's {base:.4g} ({show(largest)}) would have failed it"
        )
    if within:
        if not blind and mdc <= 2 * tol:
            return "", True
        return (
            f"{head}: {WITHIN} (one repeat a side), it fails only past {show(fails_past)} (the tolerance with "
            f"the noise floor) and {sees}{'; ' + blind if blind else ''}; more requests do not lower that, "
            "repeats (2+ a side) do",
            not blind,
        )
    if blind and largest is not None:
        have = mdc - tol if mdc > largest else (below or 0.0)
        return f"{head}: {_needs(g, have, largest - tol)}: {blind}: no candidate could have failed it", False
    if mdc <= 2 * tol:
        return "", True
    if tol <= 0:
        return (
            f"{head}: a zero tolerance is seen by no interval that has a width; {sees}; give the gate a tolerance",
            True,
        )
    return f"{head}: {_needs(g, mdc - tol, tol)}: {sees}", True


def _below(row: MetricRow | None) -> float | None:
    """How far the harm's interval reaches below the harm (its lower half-width; MOVER's is wider
    than the SE says toward a candidate at the metric's bound)."""
    if row is None or row.delta is None or row.ci is None:
        return None
    harm, harm_ci = harm_of(row.metric, row.delta, row.ci)
    return None if harm_ci is None else harm - harm_ci[0]


def _needs(g: GateResult, have: float, want: float) -> str:
    """``needs ~N prompts (has n)``: the units at which the SE, shrinking as 1/sqrt(n), makes the
    detectable change beyond the tolerance ``have`` shrink to ``want``."""
    unit = g.unit or "units"
    if not g.units or want <= 0:
        return f"needs ~{(have / want) ** 2:.1f}x the {unit} per side" if want > 0 else f"needs more {unit}"
    return f"needs ~{math.ceil(g.units * (have / want) ** 2)} {unit} (has {g.units})"


def judge(comp: Comparison) -> None:
    """Turn every passed check that is too weak for its tolerance inconclusive (or, under
    ``comp.allow_weak``, label it where --allow-weak may pass it). Run after Holm and the MDCs."""
    for cell in comp.cells:
        rows = {r.name: r for r in cell.rows}
        cell.gates = [_judged(g, rows.get(g.metric), comp.allow_weak) for g in cell.gates]


def _judged(g: GateResult, row: MetricRow | None, allow_weak: bool) -> GateResult:
    if g.status != Status.PASS:
        return g
    vacuous = beyond_range(g, row)
    if vacuous:
        return replace(g, notes=(vacuous, *g.notes))
    reason, allowable = weakness(g, row)
    if not reason:
        return g
    if allow_weak and allowable:
        return replace(g, weak=reason, notes=(f"weak check passed under --allow-weak: {reason}", *g.notes))
    name, _, rest = g.message.partition(": ")
    message = f"{name}: {reason}; not a pass: {rest}" if rest else f"{name}: {reason}"
    return replace(g, weak=reason, status=Status.INCONCLUSIVE, message=message)

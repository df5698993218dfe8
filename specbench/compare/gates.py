"""Gate expressions (``acceptance_length:-3%``) parsed into typed objects, and the gate decision.

Grammar (one line, shown in every parse error)::

    METRIC[INDEX]:SIGNED_TOLERANCE[%|pp]

- METRIC: mean_acceptance_length (alias acceptance_length), draft_acceptance_rate,
  per_position[i|*], conditional[i|*], ttft_p50_ms, itl_p50_ms, e2e_p50_ms, output_tok_per_s,
  speedup (over the run's baseline cell serving the same target: ``speedup:-5%``), divergence_share (share of prompts
  whose greedy output differs from the baseline cell's: ``divergence_share:+10pp``).
- The sign is the allowed direction of change: ``-`` for higher-is-better metrics (a drop of up to
  the tolerance is allowed), ``+`` for lower-is-better ones (``ttft_p50_ms:+10%``). A sign against
  the metric's direction is a usage error, so a gate can never silently test nothing. 0 needs no sign.
- Unit: ``%`` relative to the baseline's point estimate; ``pp`` percentage points (fraction metrics
  only: ``-2pp`` = -0.02); none = absolute, in the metric's own unit (``acceptance_length:-0.1``).
  A fraction metric's tolerance must carry ``pp`` or ``%``: a bare ``-5`` on a 0-1 metric would be a
  tolerance of 5.0 that tests nothing, so it is refused naming both spellings.
- Aliases as the tables print them: ``AL``, ``DAR``, ``p_0`` (``p0``), ``alpha_1`` / ``α_1``; the
  gate is shown in its canonical form (``per_position[0]:-2pp``).

The decision (three states; nothing missing is ever a pass):
let ``harm`` be the change in the bad direction (``base - cand`` for higher-is-better metrics,
``cand - base`` otherwise) and ``[harm_lo, harm_hi]`` its CI at ``confidence``. The check
FAILS iff ``harm_lo > tol``: the whole CI lies past the tolerance in the bad direction, a one-sided
test of "true harm <= tol" at level (1 - confidence) / 2 (2.5% at 95%): that is the false-alarm
rate each check controls. It PASSES iff ``harm_hi <= tol``: the whole CI lies within the tolerance,
so a true harm of the tolerance passes with probability <= 2.5% (docs/gate.md). An interval that
straddles the tolerance is INCONCLUSIVE (``GateResult.undecided``; :mod:`specbench.compare.power`
says how many units would decide it). It is also INCONCLUSIVE when the metric is missing on a side, the cell failed or is on one side only, the
selector or position matches nothing, or there is no CI (too few units): a point estimate alone
never decides. Nor does a CI of zero width around a change (every unit or resample shows the
same change: too few distinct units to measure spread); zero width around no change at all (every
unit identical on both sides) passes. Each decided check carries a one-sided p-value (t intervals: from SE and df;
bootstrap intervals: the share of replicates inside the tolerance); the compare then holds the
family-wise rate over every check it made, all cells x all gate lines, with Holm
(:mod:`specbench.compare.gate_checks`) unless turned off (``--no-holm``).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Optional, Union

from specbench.analysis.deltas import bootstrap_p, one_sided_p
from specbench.axis import AxisScalar, AxisValues, on_off
from specbench.compare.exact import ROUNDING, scale, snap
from specbench.compare.registry import METRICS, Metric, expand_short, resolve, row_name
from specbench.compare.verdicts import GateResult, MetricRow, Status
from specbench.errors import ConfigError
from specbench.io import read_text
from specbench.safe_yaml import load_yaml

GRAMMAR = (
    "METRIC[INDEX]:SIGNED_TOLERANCE[%|pp], e.g. acceptance_length:-3%  per_position[*]:-2pp  "
    "p_0:-2pp  ttft_p50_ms:+10%; metrics: "
    + ", ".join(f"{n}[i|*]" if m.indexed else n for n, m in METRICS.items())
    + " (aliases acceptance_length and AL, DAR, p_i, alpha_i / α_i)"
)

# Without a --gate or --gate-file: guards acceptance, the thing specbench exists to measure.
DEFAULT_GATES = ("acceptance_length:-3%", "per_position[*]:-2pp")

_EXPR = re.compile(
    r"^(?P<metric>[A-Za-z_][A-Za-z0-9_]*(?:/s)?)(?:\[(?P<index>\*|\d+)\])?"
    r":(?P<value>[+-]?(?:\d+\.?\d*|\.\d+))(?P<unit>%|pp)?$"
)


class GateError(ConfigError):
    """A malformed gate expression or gate file."""


@dataclass(frozen=True)
class Gate:
    """One parsed gate. ``index`` None = unindexed metric, -1 = every position (``[*]``)."""

    expr: str
    metric: Metric
    index: int | None
    value: float  # signed, as written (in the unit below)
    unit: str  # "abs" | "%" | "pp"
    cells: tuple[tuple[str, tuple[str, ...]], ...] = ()  # selector: axis -> allowed values
    origin: str = field(default="", compare=False)  # "FILE: gates[i]" for a gate read from a --gate-file

    @property
    def all_positions(self) -> bool:
        return self.index == -1

    @property
    def row(self) -> str:
        """The metric instance the gate names in tables and results: ``per_position[0]``, ``[*]`` for all."""
        return row_name(self.metric, "*" if self.all_positions else self.index)

    def tolerance(self, base_value: float) -> float:
        """The allowed harm, >= 0, in the metric's unit (``%`` is relative to ``base_value``)."""
        v = abs(self.value)
        if self.unit == "pp":
            return v / 100
        if self.unit == "%":
            return v / 100 * abs(base_value)
        return v

    def selects(self, axes: AxisValues) -> bool:
        return all(str(axes.get(axis)) in values for axis, values in self.cells)

    def describe(self) -> str:
        if not self.cells:
            return self.expr
        sel = ",".join(f"{a}={'|'.join(v)}" for a, v in self.cells)
        return f"{self.expr} @ {sel}"


# A gate's cells: filter as a gate file writes it: axis -> the value, or the values, a cell it
# selects has (scalars, as a cell's AxisValues hold them; YAML's bare on/off arrive as booleans).
CellFilter = dict[str, Union[Optional[AxisScalar], list[Optional[AxisScalar]]]]


def parse_gate(expr: str, *, cells: CellFilter | None = None) -> Gate:
    """Parse one expression; GateError naming it and showing the grammar when it is malformed."""
    text = expand_short(str(expr).strip().replace(" ", ""))
    m = _EXPR.match(text)

    def bad(why: str) -> GateError:
        return GateError(f"gate {expr!r}: {why}; grammar: {GRAMMAR}")

    if not m:
        raise bad("not of the form METRIC[INDEX]:SIGNED_TOLERANCE[%|pp]")
    metric = resolve(m["metric"])
    if metric is None:
        raise bad(f"unknown metric {m['metric']!r}")
    if metric.indexed and m["index"] is None:
        raise bad(f"{metric.name} needs a position: {metric.name}[0] or {metric.name}[*]")
    if not metric.indexed and m["index"] is not None:
        raise bad(f"{metric.name} has no positions; drop [{m['index']}]")
    index = None if m["index"] is None else (-1 if m["index"] == "*" else int(m["index"]))
    unit = m["unit"] or "abs"
    value = float(m["value"])
    if unit == "abs" and metric.is_fraction and value != 0:
        # a bare number on a 0-1 metric: -5 meant -5pp far more often than a tolerance of 5.0 (which tests nothing)
        v = m["value"].lstrip("+-")
        as_pp = f"; {v} as a fraction is {abs(value) * 100:g}pp" if abs(value) < 1 else ""
        raise bad(
            f"{metric.name} is a fraction (0-1), so its tolerance needs a unit: "
            f"{m['value'][0]}{v}pp (percentage points{as_pp}) or {m['value'][0]}{v}% (relative to the baseline)"
        )
    if unit == "pp" and not metric.is_fraction:
        raise bad(
            f"pp (percentage points) only applies to fractions; {metric.name} is in {metric.unit}, use % or "
            "an absolute number"
        )
    if value != 0:
        want = "-" if metric.higher_is_better else "+"
        if m["value"][0] != want:
            better = "higher" if metric.higher_is_better else "lower"
            raise bad(
                f"{metric.name} is {better}-is-better, so its allowed change must be written {want}"
                f"{m['value'].lstrip('+-')}{m['unit'] or ''}"
            )
    name = "acceptance_length" if metric.name == "mean_acceptance_length" else metric.name  # as the docs spell it
    canonical = f"{name}[{m['index']}]" if metric.indexed else name
    canonical = f"{canonical}:{m['value']}{m['unit'] or ''}"
    return Gate(expr=canonical, metric=metric, index=index, value=value, unit=unit, cells=_selector(expr, cells))


def _selector(expr: str, cells: CellFilter | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not cells:
        return ()
    out = []
    for axis, values in cells.items():
        vals = values if isinstance(values, list) else [values]
        # YAML 1.1 reads bare on/off as booleans; axis values are stored as "on"/"off".
        out.append(
            (
                str(axis),
                tuple(on_off(v) if isinstance(v, bool) else str(v) for v in vals),
            )
        )
    return tuple(sorted(out))


def load_gate_file(path: Path) -> list[Gate]:
    """Read a YAML gate file: a list of expressions, or ``{gates: [...]}`` whose items are
    expressions or ``{gate: EXPR, cells: {axis: value | [values]}}``. GateError names file and item."""
    import yaml
    from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

    FilterValue = Annotated[Union[Optional[AxisScalar], list[Optional[AxisScalar]]], BeforeValidator(_filter_value)]

    class _Item(BaseModel):
        model_config = ConfigDict(extra="forbid")
        gate: str
        cells: Optional[dict[str, FilterValue]] = None

    class _File(BaseModel):
        model_config = ConfigDict(extra="forbid")
        gates: list[str | _Item]

    path = Path(path)
    text = read_text(path, "gate file", fix="pass a YAML list of gates", error=GateError)
    try:
        data = load_yaml(text)  # duplicates, alias bombs, depth refused
    except yaml.YAMLError as exc:
        raise GateError(f"{path}: not readable YAML ({str(exc).splitlines()[0]})") from None
    if isinstance(data, list):
        data = {"gates": data}
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        # An item is "str | {gate, cells}": pydantic reports both branches; the mapping branch is the
        # informative one for a mapping, so drop "should be a valid string" noise next to it.
        errs = [e for e in exc.errors() if e["type"] != "string_type"] or exc.errors()
        what = "; ".join(".".join(str(p) for p in e["loc"] if p != "_Item") + f": {e['msg']}" for e in errs)
        raise GateError(
            f"{path}: {what}; expected a list of gate expressions "
            "or {gates: [EXPR | {gate: EXPR, cells: {axis: value}}]}"
        ) from None
    if not parsed.gates:
        raise GateError(f"{path}: no gates listed")
    gates = []
    for i, item in enumerate(parsed.gates):
        expr, cells = (item, None) if isinstance(item, str) else (item.gate, item.cells)
        try:
            gates.append(replace(parse_gate(expr, cells=cells), origin=f"{path}: gates[{i}]"))
        except GateError as exc:
            raise GateError(f"{path}: gates[{i}]: {exc}") from None
    return gates


def _filter_value(value: object) -> object:
    """A gate file's ``cells:`` value as the selector takes it: an axis value or a list of them;
    a mapping or a nested list is refused, naming the value (the gate file's error gives the field)."""
    return [_filter_scalar(v) for v in value] if isinstance(value, list) else _filter_scalar(value)


def _filter_scalar(value: object) -> object:
    from pydantic_core import PydanticCustomError

    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (dict, list)):
        raise PydanticCustomError(
            "axis_value",
            "{value} is not an axis value: give a value (text, a number, on/off) or a list of values",
            {"value": repr(value)},
        )
    return str(value)  # another YAML scalar (a date): matched as its text, as a cell's axes hold it


# How to get units, per metric source, for an inconclusive "no CI" check.
HINTS = {
    "acceptance": "get units: per-request acceptance (the built-in load driver records it), several log windows "
    "(a load longer than vLLM's 10 s log interval), or repeats: 2+ in the study",
    "requests": "get units: per-request rows (requests.jsonl, built-in driver or llmperf) with more requests, "
    "or repeats: 2+ in the study",
    "summary": "get units: per-request rows (requests.jsonl with output_tokens and e2e) or repeats: 2+",
    "study": "needs finished requests in this cell and in the run's baseline cell on both sides",
}


def harm_of(metric: Metric, delta: float, ci: tuple[float, float] | None) -> tuple[float, tuple[float, float] | None]:
    """Change in the bad direction (positive = worse) and its CI, from ``cand - base`` and its CI."""
    if metric.higher_is_better:
        return -delta, (None if ci is None else (-ci[1], -ci[0]))
    return delta, ci


# The detection probability the printed minimum detectable change promises.
POWER = 0.8


def minimum_detectable(tol: float, se: float, df: float | None, alpha: float, m: int = 1) -> float:
    """The true harm a check detects with probability :data:`POWER` when the harm leaves the SE as
    measured: ``tol + (z_(1-alpha/m) + z_POWER) * SE`` (normal), or with ``df`` the exact t-test
    version (the noncentrality at which a t with ``df`` passes its 1 - alpha/m quantile with
    probability POWER; a little above t_(1-alpha/m) + t_POWER at few df). ``alpha / m`` is the
    level Holm asks of a lone true harm among ``m`` checks. Tolerance + CI half-width, printed
    before, is the harm detected about half of the time."""
    from scipy.stats import norm

    if not df:
        return tol + float(norm.ppf(1 - alpha / m) + norm.ppf(POWER)) * se
    return tol + _noncentrality(1 - alpha / m, float(df)) * se


@functools.lru_cache(maxsize=1024)
def _noncentrality(level: float, df: float) -> float:
    """The noncentrality at which a t with ``df`` passes its ``level`` quantile with probability
    POWER. A root search over the noncentral t (~1.5 ms); a compare asks it for every check with the
    same few (level, df), and the Monte Carlo tests ask it thousands of times."""
    from scipy.optimize import brentq
    from scipy.stats import nct, t

    crit = float(t.ppf(level, df))
    start = crit + float(t.ppf(POWER, df))
    return float(brentq(lambda x: nct.sf(crit, df, x) - POWER, start / 2, start * 4 + 10))


def decide(
    gate: Gate,
    base: float | None,
    cand: float | None,
    ci: tuple[float, float] | None,
    name: str | None = None,
    *,
    se: float | None = None,
    df: float | None = None,
    why: str = "",
    replicates=None,
    confidence: float = 0.95,
    tolerance: float | None = None,
    cell: str = "",
) -> GateResult:
    """Apply the rule in the module docstring to one metric instance (``ci`` is of ``cand - base``
    at ``confidence``; ``se``/``df`` when it is a t interval, ``replicates`` of ``cand - base`` when
    it is a bootstrap one, for the p-value and the SE; ``why`` says why there is no CI). The minimum
    detectable change is for this check alone; a compare re-states it for its correction.
    ``tolerance`` replaces the gate's allowed harm (the noise floor's, specbench/compare/noise.py).
    The check it returns is the one every later step (specbench/compare/gate_checks.py) replaces."""
    name = name or row_name(gate.metric, gate.index)

    def check(status: Status, message: str, **decided: Any) -> GateResult:
        return GateResult(cell=cell, gate=gate.describe(), metric=name, status=status, message=message, **decided)

    if base is None or cand is None or _nan(base) or _nan(cand):
        return check(Status.INCONCLUSIVE, f"{name}: not measured on both sides")
    tol = gate.tolerance(base) if tolerance is None else tolerance
    harm, harm_ci, s = _snapped_harm(gate.metric, base, cand, ci)
    word = f"worse by {harm:.4g}" if harm > 0 else (f"better by {-harm:.4g}" if harm < 0 else "unchanged")
    head = f"{name}: base {base:.4g} -> cand {cand:.4g} ({word}"
    if harm_ci is None:
        return check(
            Status.INCONCLUSIVE,
            f"{head}, no CI; allowed {tol:.4g} from {gate.expr}): no verdict from a point estimate "
            f"({why or 'too few units'}); {HINTS[gate.metric.source]}",
            harm=harm,
            tolerance=tol,
        )
    if harm_ci[1] - harm_ci[0] <= ROUNDING * s and harm != 0:
        return check(
            Status.INCONCLUSIVE,
            f"{head}, CI of zero width; allowed {tol:.4g} from {gate.expr}): a zero-width interval never "
            "decides: every unit or resample shows the same change, so there are too few distinct units "
            f"to measure its spread; {HINTS[gate.metric.source]}",
            harm=harm,
            harm_ci=harm_ci,
            tolerance=tol,
        )
    p = _p_value(gate.metric, harm, tol, se, df, replicates)
    t_df = df if se is not None else None
    spread = _spread(se, t_df, replicates, harm_ci, confidence)
    mdc = minimum_detectable(tol, spread, t_df, (1 - confidence) / 2)
    msg = f"{head}, CI of harm [{harm_ci[0]:.4g}, {harm_ci[1]:.4g}]; allowed {tol:.4g} from {gate.expr})"
    if harm_ci[0] > tol:
        status, undecided = Status.FAIL, ""
    elif harm_ci[1] <= tol:
        status, undecided = Status.PASS, ""
    else:  # the interval straddles the tolerance: neither known within it nor known past it
        status, undecided = Status.INCONCLUSIVE, STRADDLES
    return check(
        status,
        msg,
        harm=harm,
        harm_ci=harm_ci,
        tolerance=tol,
        p_value=p,
        mdc=mdc,
        se=spread,
        df=t_df,
        undecided=undecided,
    )


STRADDLES = "not known to be within the tolerance: its interval straddles it"


def decide_row(
    gate: Gate, row: MetricRow, *, confidence: float, tolerance: float | None = None, cell: str = ""
) -> GateResult:
    """:func:`decide` on one compared row: its values, its interval and how that was made."""
    return decide(
        gate,
        row.base,
        row.cand,
        row.ci,
        row.name,
        se=row.se,
        df=row.df,
        why=row.why,
        replicates=row.replicates,
        confidence=confidence,
        tolerance=tolerance,
        cell=cell,
    )


def _snapped_harm(
    metric: Metric, base: float, cand: float, ci: tuple[float, float] | None
) -> tuple[float, tuple[float, float] | None, float]:
    # A NaN bound is no CI at all; within rounding of the metric's scale is 0 (compare/exact.py).
    harm, harm_ci = harm_of(metric, cand - base, None if ci is None or any(map(_nan, ci)) else ci)
    s = scale(metric, base, cand)
    harm = snap(harm, s) or 0.0
    if harm_ci is not None:
        harm_ci = (snap(harm_ci[0], s) or 0.0, snap(harm_ci[1], s) or 0.0)
    return harm, harm_ci, s


def _p_value(metric: Metric, harm: float, tol: float, se: float | None, df: float | None, replicates) -> float | None:
    if se is not None and df is not None:
        return one_sided_p(harm, tol, se, df)
    if replicates is not None:
        return bootstrap_p(-replicates if metric.higher_is_better else replicates, tol)
    return None


def _spread(se: float | None, df: float | None, replicates, harm_ci: tuple[float, float], confidence: float) -> float:
    """The harm's standard error: the t interval's, the bootstrap replicates' SD, else from the width."""
    import numpy as np
    from scipy.stats import norm

    if se is not None and df is not None:
        return float(se)
    reps = None if replicates is None else np.asarray(replicates, dtype=float)
    if reps is not None and np.isfinite(reps).sum() > 1:
        return float(np.std(reps[np.isfinite(reps)], ddof=1))
    return (harm_ci[1] - harm_ci[0]) / 2 / float(norm.ppf((1 + confidence) / 2))


def _nan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)

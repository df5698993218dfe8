"""Between-run variance of latency and throughput: repeats as the unit, else a noise floor.

A latency or throughput figure moves with the machine's load, and one run shares one load: the
intervals over requests (BCa of the median, the per-request throughput SE, the speed-up's
bootstrap) cover request-to-request noise inside a run, not a shift of the whole run. Same-config
reruns on one shared 2-core VM moved e2e_p50_ms by up to +210% (1163 -> 3607 ms), and those
within-run intervals failed each other (benchmarks/noise_floor.py; docs/methods.md,
"Between-run variance"). So, for the run-level metrics (:data:`RUN_LEVEL`):

- **Both sides have >= 2 repeats** of the cell: the repeat is the unit. One value per repeat (the
  median over that repeat's requests, the repeat's load throughput, its speed-up over the same
  repeat of its baseline cell), the mean over repeats as the point, Welch t over the repeats
  (df min(n) - 1) as the interval: scope ``between repeats``.
- **Otherwise**: scope ``within-run only``. The check keeps its within-run interval but fails only
  when that interval lies past the tolerance *and* past the metric's noise floor (:data:`DEFAULT_FLOORS`,
  or a file: :func:`load_floors`); past the tolerance but not past the floor it is inconclusive, and a
  pass is labelled within-run only.

"Past the floor" is multiplicative, as load scales times: a floor of +250% lets a whole run be
``phi`` = 3.5x slower, so a ``+10%`` latency gate fails only when the candidate's CI is past
(1.1 x 3.5 - 1) of the baseline; a throughput floor of -75% lets it be 4x slower (phi = 4). Acceptance
counts and divergence do not depend on the machine's load and are not touched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from specbench.analysis import deltas as iv
from specbench.analysis.speedup import cell_stats, request_matrix, speedups
from specbench.compare.gates import Gate, decide_row, minimum_detectable
from specbench.compare.registry import METRICS, Metric
from specbench.compare.sides import SideCell
from specbench.compare.verdicts import GateResult, MetricRow, Status
from specbench.errors import ConfigError
from specbench.io import read_text
from specbench.safe_yaml import load_yaml

BETWEEN = "between repeats"
WITHIN = "within-run only"
LATENCY = ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms")
RUN_LEVEL = LATENCY + ("output_tok_per_s", "speedup")
MIN_REPEATS = 2

# The worst harm between same-config runs on one machine, rounded up (benchmarks/noise_floor.py
# over the committed runs: 28 ordered pairs of cells from three studies on the 2-core Intel VM,
# 2026-12-03; speed-up 6): latency +179% (TTFT), +219% (ITL), +210% (e2e); output tok/s -69%;
# speed-up -63%. A floor below the worst seen would fail those reruns against each other.
DEFAULT_FLOORS = {"ttft_p50_ms": 2.5, "itl_p50_ms": 2.5, "e2e_p50_ms": 2.5, "output_tok_per_s": -0.75, "speedup": -0.70}
DEFAULT_SOURCE = "default: worst same-config rerun on one machine, docs/methods.md"


@dataclass(frozen=True)
class Floor:
    """How far a whole run may move a metric with nothing changed: ``change`` relative, signed in
    the harmful direction (+2.5 = +250% for a lower-is-better metric, -0.75 for a higher-is-better one)."""

    change: float
    source: str = DEFAULT_SOURCE

    @property
    def factor(self) -> float:
        """The largest whole-run slow-down, as a factor >= 1."""
        return 1 + self.change if self.change >= 0 else 1 / (1 + self.change)

    def describe(self) -> str:
        return f"{self.change * 100:+.0f}% ({self.source})"


def default_floors() -> dict[str, Floor]:
    return {name: Floor(change) for name, change in DEFAULT_FLOORS.items()}


def load_floors(path: Path) -> dict[str, Floor]:
    """A noise-floor file: YAML ``{metric: "+120%" | -0.5, ...}`` (metrics of :data:`RUN_LEVEL`; each
    signed in its harmful direction, as a gate). Metrics it leaves out keep their default floor.
    ConfigError naming the file and the entry when it is malformed."""
    import yaml

    path = Path(path)
    fix = "write {metric: SIGNED_CHANGE}, e.g. {e2e_p50_ms: +80%, output_tok_per_s: -45%}"
    text = read_text(path, "noise-floor file", fix=fix, error=ConfigError)
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not readable YAML ({str(exc).splitlines()[0]}); {fix}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{path}: expected a mapping of metrics to floors; {fix}")
    out = default_floors()
    for name, value in data.items():
        if name not in RUN_LEVEL:
            raise ConfigError(f"{path}: {name!r}: not a latency or throughput metric (one of {', '.join(RUN_LEVEL)})")
        change = _change(value)
        worse_up = not METRICS[name].higher_is_better
        if change is None or not math.isfinite(change) or (change <= 0 if worse_up else not -1 < change < 0):
            want = "a positive change, e.g. +80%" if worse_up else "a negative change above -100%, e.g. -45%"
            raise ConfigError(
                f"{path}: {name}: {value!r} is not a floor; {name} is "
                f"{'lower' if worse_up else 'higher'}-is-better, so its floor is {want}"
            )
        out[name] = Floor(change, f"from {path}")
    return out


def _change(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            return None
    return None


def allowed(metric: Metric, base: float, tol: float, floor: Floor, worse: bool = True) -> float:
    """The harm (``worse``) or the gain a check with tolerance ``tol`` allows once a whole-run shift
    up to the floor is allowed too, in the metric's unit (``tol`` relative to ``base``, compounded)."""
    t, phi = (tol / abs(base) if base else 0.0), floor.factor
    up, down = (1 + t) * phi - 1, 1 - max(0.0, 1 - t) / phi  # the relative rise / fall the floor allows
    grows = worse != metric.higher_is_better  # a harm of a lower-is-better metric is a rise
    return abs(base) * (up if grows else down)


def scope_rows(
    rows: list[MetricRow],
    bc: SideCell,
    cc: SideCell,
    refs: tuple[SideCell | None, SideCell | None],
    confidence: float,
    floors: dict[str, Floor] | None = None,
) -> None:
    """Give every run-level row its scope: its interval from the repeats when both sides have >= 2,
    else labelled within-run only with the floor it is held to."""
    floors = floors or default_floors()
    for row in rows:
        if row.name not in RUN_LEVEL:
            continue
        vb, vc = repeat_values(row.name, bc, refs[0]), repeat_values(row.name, cc, refs[1])
        if len(vb) >= MIN_REPEATS and len(vc) >= MIN_REPEATS:
            d = iv.mean_delta(vb, vc, confidence)
            row.base, row.cand = float(np.mean(vb)), float(np.mean(vc))
            row.delta, row.ci, row.se, row.df, row.why, row.replicates = (
                row.cand - row.base,
                d.ci,
                d.se,
                d.df,
                d.why,
                None,
            )
            row.method = f"{BETWEEN}: one value per repeat ({_ONE[row.name]}), Welch t, {len(vb)} vs {len(vc)} repeats"
            row.scope = BETWEEN
        else:
            row.scope, row.floor = WITHIN, floors[row.name]
            what = f"{len(vb)} vs {len(vc)} repeats" if vb and vc else "repeats unknown"
            row.method = f"{row.method or 'no interval'} ({WITHIN}: {what}; a whole-run shift is not inside)"


_ONE = {
    "ttft_p50_ms": "the median over its requests",
    "itl_p50_ms": "the median over its requests",
    "e2e_p50_ms": "the median over its requests",
    "output_tok_per_s": "its load's output tok/s",
    "speedup": "its speed-up over the same repeat of its baseline cell",
}


def repeat_values(name: str, cell: SideCell, ref: SideCell | None) -> list[float]:
    """One value of ``name`` per finished repeat of ``cell`` (repeats lacking it left out)."""
    if name in LATENCY:
        values, reps = cell.latency.get(name) or [], cell.latency_repeat.get(name) or []
        if values:
            by: dict[Any, list[float]] = {}
            for v, r in zip(values, reps):
                by.setdefault(r, []).append(v)
            return [float(np.median(v)) for _, v in sorted(by.items(), key=lambda kv: repr(kv[0]))]
        return list(cell.summary.get(name) or [])
    if name == "output_tok_per_s":
        return list(cell.summary.get(name) or [])
    if name == "speedup" and ref is not None:
        return _repeat_speedups(cell, ref)
    return []


def _repeat_speedups(cell: SideCell, ref: SideCell) -> list[float]:
    out = []
    for r in sorted(set(cell.repeats) & set(ref.repeats), key=repr):
        _, ms = request_matrix([x for x in cell.requests if x.repeat == r])
        _, mb = request_matrix([x for x in (cell.paired or ref.requests) if x.repeat == r])
        if len(ms) and len(mb):
            value = float(speedups(cell_stats(ms.sum(axis=0)), cell_stats(mb.sum(axis=0)))["output_tok_per_s"])
            if math.isfinite(value):
                out.append(value)
    return out


def within_run(gate: Gate, row: MetricRow, check: GateResult, confidence: float) -> GateResult:
    """A decided check of a within-run-only row: a failure stands only past the noise floor, else
    it is inconclusive; a pass is labelled. The p-value is the floor's test (Holm), and ``floor``
    the harm the check can fail past (its minimum detectable change)."""
    if not check.tested or row.floor is None or row.base is None:
        return check
    limit = allowed(row.metric, row.base, check.tolerance or 0.0, row.floor)
    past = decide_row(gate, row, confidence=confidence, tolerance=limit)
    held = replace(check, p_value=past.p_value, floor=limit, scope=WITHIN)
    if held.se is not None:  # it can fail only past the limit: that is what it detects from
        held = replace(held, mdc=minimum_detectable(limit, held.se, held.df, (1 - confidence) / 2))
    floor = f"the noise floor of {row.name}, {row.floor.describe()}"
    if held.status == Status.FAIL and past.status == Status.FAIL:
        return replace(
            held,
            message=f"{held.message}; beyond {floor}: the CI of harm is past {limit:.4g}, more than a whole-run "
            f"shift explains ({WITHIN}: one repeat a side)",
        )
    if held.status == Status.FAIL:
        return replace(
            held,
            status=Status.INCONCLUSIVE,
            p_value=None,
            message=f"{held.message}; {WITHIN}: past the tolerance inside this run, but not past "
            f"{floor}, which a whole-run shift from machine load reaches (a harm past "
            f"{limit:.4g} would fail); {HINT}",
        )
    note = f"{WITHIN}: its interval covers request-to-request noise, not a whole-run shift; {HINT}"
    return replace(held, notes=(*held.notes, note))


HINT = "repeats: 2+ a side give a between-run interval; --noise-floor FILE: a floor measured on this machine"


def not_after_holm(result: GateResult, m: int) -> GateResult:
    """A within-run failure past the floor per check that Holm does not reject: inconclusive, not a
    pass (it was past the tolerance inside the run)."""
    return replace(
        result,
        status=Status.INCONCLUSIVE,
        message=f"{result.message}; not decided: past the noise floor at the per-check level "
        f"(p = {result.p_value:.3g}) but not after Holm over all {m} checks of this compare",
    )


def scope_warning(comp) -> list[str]:
    """One line when some latency / throughput check had only within-run intervals: what that means."""
    within = [g for g in comp.checks if g.scope == WITHIN]
    if not within:
        return []
    held = sorted({g.metric for g in within}, key=RUN_LEVEL.index)
    rows = {r.name: r for c in comp.cells for r in c.rows if r.floor is not None}
    floors = ", ".join(f"{m} {rows[m].floor.change * 100:+.0f}%" for m in held if m in rows)
    return [
        f"{len(within)} latency/throughput check(s) are {WITHIN} (one repeat a side): their intervals cover "
        "request-to-request noise, not a whole-run shift from machine load, so a change past the tolerance is "
        f"inconclusive unless it is also past the noise floor ({floors}; "
        f"{next(iter(rows.values())).floor.source if rows else DEFAULT_SOURCE}); {HINT}"
    ]

"""Compare two sides cell by cell: point estimates, deltas, bootstrap CIs, verdicts and gates.

Pure: :class:`~specbench.compare.sides.Side` objects in, a :class:`Comparison` out; rendering
and exit codes live elsewhere. Acceptance deltas use :func:`specbench.analysis.bootstrap_delta`
(units resampled independently per side, counts summed: a ratio estimator); latency deltas
bootstrap the median over requests. A verdict is ``worse``/``better`` only when the CI of the
delta excludes 0 *and* the change is past the row's tolerance (its gate's, else 0); else ``~``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from specbench.analysis.acceptance import bootstrap_delta, point_estimates
from specbench.compare.gates import Decision, Gate, decide, harm_of
from specbench.compare.metrics import METRICS, Metric, row_name, stat_key
from specbench.compare.sides import Side, SideCell


@dataclass
class MetricRow:
    name: str
    metric: Metric
    index: int | None
    base: float | None
    cand: float | None
    delta: float | None
    ci: tuple[float, float] | None  # CI of cand - base; None when it cannot be estimated
    verdict: str = "~"
    tolerance: float | None = None

    @property
    def rel(self) -> float | None:
        if self.delta is None or not self.base:
            return None
        return self.delta / abs(self.base)


@dataclass
class GateResult:
    cell: str
    gate: str
    metric: str
    status: str  # "pass" | "fail" | "skip"
    message: str
    notes: list[str] = field(default_factory=list)


@dataclass
class CellComparison:
    name: str
    axes: dict[str, Any]
    base_ids: list[str]
    cand_ids: list[str]
    base_units: int
    cand_units: int
    unit_kind: str | None
    rows: list[MetricRow] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)


@dataclass
class Comparison:
    base_label: str
    cand_label: str
    cells: list[CellComparison]
    only_base: list[str]
    only_cand: list[str]
    mismatches: list[str]
    warnings: list[str]
    gates: list[str]
    default_gates: bool
    confidence: float
    n_resamples: int

    @property
    def failures(self) -> list[GateResult]:
        return [g for c in self.cells for g in c.gates if g.status == "fail"]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def to_dict(self) -> dict[str, Any]:
        def row(r: MetricRow) -> dict[str, Any]:
            d = {k: v for k, v in asdict(r).items() if k != "metric"}
            d.update(unit=r.metric.unit, higher_is_better=r.metric.higher_is_better, rel=r.rel,
                     ci=None if r.ci is None else list(r.ci))
            return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

        return {
            "baseline": self.base_label, "candidate": self.cand_label, "exit_code": self.exit_code,
            "confidence": self.confidence, "n_resamples": self.n_resamples,
            "gates": self.gates, "default_gates": self.default_gates,
            "regressions": [asdict(g) for g in self.failures],
            "cells": [{**{k: v for k, v in asdict(c).items() if k not in ("rows", "gates")},
                       "metrics": [row(r) for r in c.rows], "gates": [asdict(g) for g in c.gates]}
                      for c in self.cells],
            "only_in_baseline": self.only_base, "only_in_candidate": self.only_cand,
            "mismatches": self.mismatches, "warnings": self.warnings,
        }


def compare_sides(base: Side, cand: Side, gates: list[Gate], *, default_gates: bool = False,
                  mismatches: list[str] | None = None, n_resamples: int = 2000, seed: int = 0,
                  confidence: float = 0.95) -> Comparison:
    """Match cells by axis values, compute every metric row, apply every gate that selects the cell."""
    cells = []
    refs = tuple(next((c for c in side.cells.values() if c.is_baseline), None) for side in (base, cand))
    for key, bc in base.cells.items():
        cc = cand.cells.get(key)
        if cc is not None:
            cells.append(compare_cell(bc, cc, gates, n_resamples=n_resamples, seed=seed, confidence=confidence,
                                      refs=refs))
    warnings = [f"baseline: {w}" for w in base.warnings] + [f"candidate: {w}" for w in cand.warnings]
    warnings += [f"baseline cell skipped: {s}" for s in base.skipped] + [f"candidate cell skipped: {s}"
                                                                         for s in cand.skipped]
    for c in cells:
        warnings += [f"{c.name}: gate {g.gate} skipped: {g.message}" for g in c.gates
                     if g.status == "skip" and "only on" in g.message]
    return Comparison(
        base_label=base.label, cand_label=cand.label, cells=cells,
        only_base=[c.name for k, c in base.cells.items() if k not in cand.cells],
        only_cand=[c.name for k, c in cand.cells.items() if k not in base.cells],
        mismatches=list(mismatches or []), warnings=warnings, gates=[g.describe() for g in gates],
        default_gates=default_gates, confidence=confidence, n_resamples=n_resamples,
    )


def compare_cell(bc: SideCell, cc: SideCell, gates: list[Gate], *, n_resamples: int = 2000, seed: int = 0,
                 confidence: float = 0.95, refs: tuple[SideCell | None, SideCell | None] = (None, None)
                 ) -> CellComparison:
    """``refs``: each side's baseline (no-speculation) cell, for speedup and divergence_share."""
    rows = _acceptance_rows(bc, cc, n_resamples, seed, confidence)
    rows += _latency_rows(bc, cc, n_resamples, seed, confidence)
    rows += _study_rows(bc, cc, refs, n_resamples, seed, confidence)
    out = CellComparison(name=bc.name, axes=bc.axes, base_ids=bc.cell_ids, cand_ids=cc.cell_ids,
                         base_units=len(bc.units), cand_units=len(cc.units),
                         unit_kind=bc.unit_kind if bc.unit_kind == cc.unit_kind else
                         f"{bc.unit_kind}/{cc.unit_kind}", rows=rows)
    by_name = {r.name: r for r in rows}
    tolerances: dict[str, list[float]] = {}
    for gate in gates:
        if not gate.selects(bc.axes):
            continue
        for name, row, decision in _apply(gate, by_name, bc, cc):
            out.gates.append(GateResult(bc.name, gate.describe(), name, decision.status, decision.message,
                                        decision.notes))
            if row is not None and decision.tolerance is not None:
                tolerances.setdefault(name, []).append(decision.tolerance)
            if row is not None and decision.status == "fail":
                row.verdict = "worse"
    for row in rows:
        row.tolerance = min(tolerances.get(row.name, [0.0]))
        if row.verdict != "worse":
            row.verdict = verdict(row)
    return out


def verdict(row: MetricRow) -> str:
    """``worse``/``better`` when the CI excludes 0 and the change is past the tolerance, else ``~``."""
    if row.delta is None or row.ci is None or any(math.isnan(x) for x in (row.delta, *row.ci)):
        return "~"
    harm, (lo, hi) = harm_of(row.metric, row.delta, row.ci)
    tol = row.tolerance or 0.0
    if lo > 0 and harm > tol:
        return "worse"
    if hi < 0 and -harm > tol:
        return "better"
    return "~"


def _apply(gate: Gate, rows: dict[str, MetricRow], bc: SideCell, cc: SideCell):
    if gate.all_positions:
        names = [n for n, r in rows.items() if r.metric is gate.metric]
        if not names:
            yield row_name(gate.metric, 0) + "..", None, _missing(gate, bc, cc)
        for n in names:
            r = rows[n]
            yield n, r, decide(gate, r.base, r.cand, r.ci, n)
        return
    n = row_name(gate.metric, gate.index)
    r = rows.get(n)
    if r is None:
        yield n, None, _missing(gate, bc, cc)
    else:
        yield n, r, decide(gate, r.base, r.cand, r.ci, n)


def _missing(gate: Gate, bc: SideCell, cc: SideCell) -> Decision:
    if gate.metric.source == "acceptance" and bool(bc.units) != bool(cc.units):
        where = "baseline" if bc.units else "candidate"
        return Decision("skip", message=f"acceptance measured only on the {where}")
    if gate.metric.source == "study" and bc.is_baseline:
        return Decision("skip", message="the baseline cell is this metric's reference")
    if gate.metric.source == "study":
        return Decision("skip", message="needs a baseline cell (baseline: true) on both sides and a speculative "
                                        "cell with finished requests")
    return Decision("skip", message="not measured in this cell")


def _acceptance_rows(bc: SideCell, cc: SideCell, n: int, seed: int, conf: float) -> list[MetricRow]:
    if not bc.units or not cc.units:
        return []
    iv = bootstrap_delta(bc.units, cc.units, n_resamples=n, seed=seed, confidence=conf)
    pb, pc = point_estimates(bc.units), point_estimates(cc.units)
    k = min(sum(1 for s in pb if s.startswith("p") and s[1:].isdigit()),
            sum(1 for s in pc if s.startswith("p") and s[1:].isdigit()))
    specs = [(METRICS["mean_acceptance_length"], None), (METRICS["draft_acceptance_rate"], None)]
    specs += [(METRICS["per_position"], i) for i in range(k)] + [(METRICS["conditional"], i) for i in range(k)]
    rows = []
    for metric, i in specs:
        key = stat_key(metric, i)
        b, c = _finite(pb.get(key)), _finite(pc.get(key))
        ci = None if iv.degenerate or key not in iv else iv[key]
        rows.append(MetricRow(row_name(metric, i), metric, i, b, c, None if b is None or c is None else c - b, ci))
    return rows


def _latency_rows(bc: SideCell, cc: SideCell, n: int, seed: int, conf: float) -> list[MetricRow]:
    rows = []
    rng = np.random.default_rng(seed)
    for name in ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms", "output_tok_per_s"):
        metric = METRICS[name]
        lb, lc = bc.latency.get(name) or [], cc.latency.get(name) or []
        if len(lb) >= 2 and len(lc) >= 2:  # medians over requests, bootstrap over requests
            b, c = float(np.median(lb)), float(np.median(lc))
            ci = _resampled_delta(lb, lc, np.median, n, rng, conf)
        else:  # per-repeat summary values; the repeats are the units when there are >= 2 each
            sb, sc = bc.summary.get(name) or [], cc.summary.get(name) or []
            if not sb or not sc:
                continue
            b, c = float(np.mean(sb)), float(np.mean(sc))
            ci = _resampled_delta(sb, sc, np.mean, n, rng, conf) if len(sb) >= 2 and len(sc) >= 2 else None
        rows.append(MetricRow(name, metric, None, b, c, c - b, ci))
    return rows


def _study_rows(bc: SideCell, cc: SideCell, refs: tuple[SideCell | None, SideCell | None], n: int, seed: int,
                conf: float) -> list[MetricRow]:
    from specbench.compare.study import study_figures

    rb, rc = refs
    if bc.is_baseline or cc.is_baseline or rb is None or rc is None:
        return []
    figures = study_figures(bc.requests, rb.requests, cc.requests, rc.requests, n_resamples=n, seed=seed,
                            confidence=conf)
    return [MetricRow(name, METRICS[name], None, b, c, c - b, ci) for name, (b, c, ci) in figures.items()]


def _resampled_delta(b: list[float], c: list[float], stat, n: int, rng: np.random.Generator,
                     conf: float) -> tuple[float, float]:
    vb, vc = np.asarray(b, dtype=float), np.asarray(c, dtype=float)
    sb = stat(vb[rng.integers(0, len(vb), size=(n, len(vb)))], axis=1)
    sc = stat(vc[rng.integers(0, len(vc), size=(n, len(vc)))], axis=1)
    alpha = (1 - conf) / 2
    lo, hi = np.quantile(sc - sb, [alpha, 1 - alpha])
    return float(lo), float(hi)


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)

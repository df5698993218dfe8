"""Known truth from vLLM's synthetic rejection sampler, against what specbench estimated (test and
benchmark support: benchmarks/calibration.py and benchmarks/truth_rates.py print from it, the
calibration test checks the study page against it).

A cell run with ``rejection_sample_method: synthetic`` accepts draft position i with the configured
*unconditional* rate p_i (``synthetic_acceptance_rates``), or with the rates vLLM derives from a
``synthetic_acceptance_length`` (its minimum-variance schedule: whole positions at 1, one fraction,
then 0). From the rates: AL = 1 + sum p_i, DAR = sum p_i / k (every draft full length),
alpha_i = p_i / p_(i-1) (alpha_0 = p_0; undefined after a rate of 0). Everything here reads a run
directory as written (cell.json, acceptance.json): the estimates and intervals are the ones the run
stored, which ``report`` and ``compare`` print.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.analysis.intervals import cell_intervals, point_estimates
from specbench.axis import AxisValues
from specbench.records.counts import Counts

RATES = "speculative:synthetic_acceptance_rates"
LENGTH = "speculative:synthetic_acceptance_length"


def length_to_rates(length: float, k: int) -> list[float]:
    """vLLM 0.32's ``SpeculativeConfig._acceptance_length_to_rates`` (minimum-variance schedule)."""
    drafts = length - 1
    full = int(drafts)
    return ([1.0] * full + [drafts - full] + [0.0] * (k - full - 1))[:k]


def truth_stats(rates: list[float]) -> dict[str, float]:
    """AL, DAR, p_i and alpha_i of a synthetic cell, keyed as acceptance.json's intervals are."""
    k = len(rates)
    out = {"mean_acceptance_length": 1 + sum(rates), "draft_acceptance_rate": sum(rates) / k}
    for i, p in enumerate(rates):
        out[f"p{i}"] = p
        prev = rates[i - 1] if i else 1.0
        out[f"a{i}"] = p / prev if prev > 0 else math.nan
    return out


@dataclass
class TruthCell:
    """One synthetic cell: what was configured beside what the run measured."""

    run: str
    cell: str
    axes: AxisValues  # cell.json's axes
    rates: list[float]  # the configured (or vLLM-resolved, for a length) unconditional rates
    length: float | None  # the configured AL target, when the cell set one
    attested_rates: list[float] | None  # what the workers' speculative config said they ran
    drafts: int
    estimates: dict[str, float]  # acceptance.json's derived values, keyed like the intervals
    intervals: dict[str, tuple[float, float]]
    log_equals_metrics: bool
    per_request_equals_metrics: bool
    units: list[Counts]

    @property
    def truth(self) -> dict[str, float]:
        return truth_stats(self.rates)

    @property
    def concurrency(self) -> int | None:
        value = self.axes.get("load:concurrency")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(v: Any) -> float:
    return math.nan if v is None else float(v)


def _estimates(derived: dict[str, Any]) -> dict[str, float]:
    out = {k: _float(derived[k]) for k in ("mean_acceptance_length", "draft_acceptance_rate")}
    out.update({f"p{i}": _float(v) for i, v in enumerate(derived["per_position"])})
    out.update({f"a{i}": _float(v) for i, v in enumerate(derived["conditional"])})
    return out


def _configured(axes: AxisValues, spec_fields: dict[str, Any], k: int) -> tuple[list[float], float | None]:
    rates = axes.get(RATES, spec_fields.get("synthetic_acceptance_rates"))
    length = axes.get(LENGTH, spec_fields.get("synthetic_acceptance_length"))
    if rates is not None:
        return _rate_list(rates), None
    if length is None:
        raise ValueError("not a synthetic cell: neither synthetic_acceptance_rates nor _length configured")
    return length_to_rates(float(length), k), float(length)


def _rate_list(value: object) -> list[float]:
    # an axis holds the rates as compact JSON text (axis.list_value_text), serve.speculative as a list
    rates = json.loads(value) if isinstance(value, str) else value
    if not isinstance(rates, list):
        raise ValueError(f"synthetic_acceptance_rates {value!r}: not a list of rates")
    return [float(r) for r in rates]


def read_cells(run_dir: Path) -> list[TruthCell]:
    """Every finished speculative cell of a synthetic run, in the manifest's cell order."""
    run_dir = Path(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    spec_fields = manifest["resolved_config"]["serve"]["speculative"]
    out = []
    ids = [c if isinstance(c, str) else c.get("cell_id") for c in manifest.get("cells", [])]
    for cell_id in ids:
        cell_json = run_dir / cell_id / "cell.json"
        if not cell_json.is_file():
            continue
        cell = json.loads(cell_json.read_text())
        if cell.get("is_baseline") or cell.get("status") != "done":
            continue
        acc = json.loads((cell_json.parent / "acceptance.json").read_text())
        k = int(acc["num_spec_tokens"])
        rates, length = _configured(cell["axes"], spec_fields, k)
        ci = acc["ci"]["intervals"]
        agreement = acc["agreement"]
        units = [
            Counts(u["num_drafts"], u["draft_tokens"], u["accepted_tokens"], u["accepted_per_position"], k)
            for u in acc["per_request"]["units"]
        ]
        out.append(
            TruthCell(
                run=run_dir.name,
                cell=cell["cell_id"],
                axes=cell["axes"],
                rates=rates,
                length=length,
                attested_rates=(cell.get("attested") or {}).get("synthetic_acceptance_rates"),
                drafts=int(acc["prometheus"]["counts"]["num_drafts"]),
                estimates=_estimates(acc["derived"]),
                intervals={key: (_float(lo), _float(hi)) for key, (lo, hi) in ci.items()},
                log_equals_metrics=bool(agreement["logs_vs_prometheus"]),
                per_request_equals_metrics=bool(agreement["per_request_vs_prometheus"]),
                units=units,
            )
        )
    return out


def _covers(interval: tuple[float, float], value: float) -> bool:
    lo, hi = interval
    return lo - 1e-12 <= value <= hi + 1e-12


@dataclass
class Coverage:
    """How often the stored 95% intervals of some statistics hold the configured truth."""

    covered: int
    pairs: int
    mean_abs_error: float
    misses: list[str]

    @property
    def share(self) -> float:
        return self.covered / self.pairs if self.pairs else math.nan


def stat_keys(cell: TruthCell, family: str) -> list[str]:
    """The statistics of one family ("AL", "DAR", "p", "alpha") a cell has a truth for."""
    if family == "AL":
        return ["mean_acceptance_length"]
    if family == "DAR":
        return ["draft_acceptance_rate"]
    prefix = {"p": "p", "alpha": "a"}[family]
    return [f"{prefix}{i}" for i in range(len(cell.rates)) if math.isfinite(cell.truth[f"{prefix}{i}"])]


def coverage(cells: list[TruthCell], family: str = "p", interior: bool = False) -> Coverage:
    """Coverage of the cells' stored intervals of one family against the configured truth, with
    the mean |estimate - truth|. ``interior`` keeps only truths strictly inside (0, 1) (a rate of 0
    or 1 is estimated exactly; its interval covers it trivially)."""
    covered = pairs = 0
    errors: list[float] = []
    misses: list[str] = []
    for c in cells:
        truth = c.truth
        for key in stat_keys(c, family):
            value = truth[key]
            if interior and family in ("p", "alpha") and not 0 < value < 1:
                continue
            pairs += 1
            errors.append(abs(c.estimates[key] - value))
            if key in c.intervals and _covers(c.intervals[key], value):
                covered += 1
            else:
                misses.append(f"{c.cell} {key}: truth {value:.4f}, CI {c.intervals.get(key)}")
    return Coverage(covered, pairs, sum(errors) / len(errors) if errors else math.nan, misses)


def split_coverage(cells: list[TruthCell], size: int, family: str) -> Coverage:
    """Coverage over disjoint groups of ``size`` consecutive requests of each cell (each group an
    independent real sample of the same truth: the synthetic sampler draws afresh per step), with
    the interval computed as the run computes a cell's (``cell_intervals``)."""
    covered = pairs = 0
    errors: list[float] = []
    misses: list[str] = []
    for c in cells:
        truth = c.truth
        keys = stat_keys(c, family)
        for start in range(0, len(c.units) - size + 1, size):
            group = c.units[start : start + size]
            iv, point = cell_intervals(group), point_estimates(group)
            for key in keys:
                lo, hi = iv[key]
                if math.isnan(lo):
                    continue
                pairs += 1
                errors.append(abs(point[key] - truth[key]))
                if _covers((lo, hi), truth[key]):
                    covered += 1
                else:
                    misses.append(f"{c.cell}[{start}:{start + size}] {key}")
    return Coverage(covered, pairs, sum(errors) / len(errors) if errors else math.nan, misses)

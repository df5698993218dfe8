"""The records of a comparison: a metric row, a gate check's result, a block, a cell and the whole
compare (its verdict, error control, JSON form; the exit code is the CLI's: specbench/cli/exits.py). Plain data below every compare module
(:mod:`~specbench.compare.gate_checks` and :mod:`~specbench.compare.noise` fill them,
:mod:`~specbench.compare.cellwise` builds them, render/junit read them)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from specbench.axis import AxisValues
from specbench.compare.registry import Metric


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
    se: float | None = None  # t intervals only (then df too): gives the gate's p-value
    df: float | None = None
    method: str = ""  # how the CI was obtained
    why: str = ""  # why there is no CI
    replicates: Any = field(default=None, repr=False)  # bootstrap intervals: replicates of cand - base (p-value)
    scope: str = ""  # latency / throughput: "between repeats" | "within-run only" (noise.py)
    floor: Any = None  # within-run only: the noise.Floor its checks are held to

    @property
    def rel(self) -> float | None:
        if self.delta is None or not self.base:
            return None
        return self.delta / abs(self.base)


class Status(str, Enum):
    """A check's verdict. A str: it compares, serialises and prints as its value (``"pass"``)."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


DECIDED = (Status.PASS, Status.FAIL)  # checks their interval decided (with the undecided ones: Holm's family)


@dataclass(frozen=True, kw_only=True)
class GateResult:
    """One check of one gate line in one cell: the one type a check has from its decision
    (:func:`specbench.compare.gates.decide` returns it) to its verdict. Immutable: every step after
    the decision (the steps of :data:`specbench.compare.gate_checks.IN_CELL` and ``OVER_COMPARE``)
    returns a new one (``dataclasses.replace``), so what a step decided is never edited by a later one unseen."""

    cell: str
    gate: str
    metric: str
    status: Status
    message: str
    notes: tuple[str, ...] = ()
    p_value: float | None = None
    mdc: float | None = None  # the harm detected with 80% probability under the compare's correction
    tolerance: float | None = None
    control: str = "per check"  # which error rate the check controls; Holm's step sets its family
    se: float | None = None  # standard error of the harm (for the minimum detectable change)
    df: float | None = None
    scope: str = ""  # latency / throughput: "between repeats" | "within-run only" (noise.py)
    floor: float | None = None  # within-run only: the harm it fails past (noise floor with the tolerance)
    units: int | None = None  # how many units its SE rests on (prompts, requests, repeats): for "needs ~N"
    unit: str = ""  # what those units are ("prompts", "requests", "windows", "repeats")
    undecided: str = ""  # why a check that did not fail is not known within its tolerance (power.py): inconclusive
    cannot_fail: str = ""  # why no candidate can be past its tolerance (power.py): a pass counted apart
    harm: float | None = None  # the change in the bad direction, as decided (gates.decide)
    harm_ci: tuple[float, float] | None = None  # its interval at the compare's confidence

    @property
    def tested(self) -> bool:
        """Whether an interval was held against the tolerance (pass, fail or straddling): Holm's family."""
        return self.status in DECIDED or bool(self.undecided)


@dataclass
class Block:
    """A reason that decides checks of a cell whatever their interval says: inconclusive (exit 3,
    never a pass: prompts unmatched, sources that disagree, ...) or, with ``Status.FAIL``, a
    failure the interval cannot express (speculation off). New reasons are one more Block; a fail
    outranks an inconclusive one (a server that did not speculate attests no k: that must not
    hide the failure), which is named beside it."""

    reason: str
    sources: tuple[str, ...] = ()  # metric sources it holds ("acceptance", ...); () = every check of the cell
    status: Status = Status.INCONCLUSIVE  # or Status.FAIL

    def holds(self, metric: Metric) -> bool:
        return not self.sources or metric.source in self.sources


@dataclass(frozen=True)
class PairingSummary:
    """Over which prompts a cell's acceptance was compared (:meth:`specbench.compare.pairing.Pairing.summary`),
    as the JSON's ``cells[].pairing`` shows it."""

    kind: str  # "paired" | "unpaired" (prompt ids, none in common) | "units" (no prompt ids)
    shared: int  # prompts on both sides (paired; else 0)
    baseline_prompts: int  # prompts (or units, kind "units") each side had
    candidate_prompts: int
    only_in_baseline: list[str]  # prompt ids with no finished request on the other side
    only_in_candidate: list[str]
    description: str  # the line the warnings and tables show (Pairing.describe)


@dataclass
class CellComparison:
    name: str
    axes: AxisValues
    base_ids: list[str]
    cand_ids: list[str]
    base_units: int
    cand_units: int
    unit_kind: str | None
    rows: list[MetricRow] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    missing: str | None = None  # why this cell has no rows (one side only, failed)
    key: tuple = ()  # the cell key (axis, value) pairs, to find the sides' cells again
    is_baseline: bool = False  # a no-speculation cell (its speculative axes read "none")
    blocks: list[Block] = field(default_factory=list)  # why some checks cannot be decided
    pairing: PairingSummary | None = None  # over which prompts acceptance was compared


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
    unmatched: list[GateResult] = field(default_factory=list)  # gates that selected no cell
    holm: bool = True
    family: int | None = None  # checks with an interval, the family Holm held (undecided ones included)
    allow_inconclusive: bool = False  # --allow-inconclusive: exit 0 where checks could not be decided

    @property
    def checks(self) -> list[GateResult]:
        return [g for c in self.cells for g in c.gates] + self.unmatched

    def map_checks(self, step: Callable[[GateResult], GateResult]) -> None:
        """Replace every check by ``step(check)`` (a step returns a new check, or the same one)."""
        for c in self.cells:
            c.gates = [step(g) for g in c.gates]
        self.unmatched = [step(g) for g in self.unmatched]

    @property
    def failures(self) -> list[GateResult]:
        return [g for g in self.checks if g.status == Status.FAIL]

    @property
    def inconclusive(self) -> list[GateResult]:
        return [g for g in self.checks if g.status == Status.INCONCLUSIVE]

    @property
    def counts(self) -> dict[str, int]:
        """Checks by outcome; a pass that could not have failed is counted as ``cannot_fail``, not ``pass``."""
        out = {s.value: sum(1 for g in self.checks if g.status == s and not g.cannot_fail) for s in Status}
        out["cannot_fail"] = len(self.cannot_fail)
        return out

    @property
    def cannot_fail(self) -> list[GateResult]:
        """Checks whose tolerance reaches the metric's worst value: nothing they guard can happen."""
        return [g for g in self.checks if g.cannot_fail]

    @property
    def verdict(self) -> Status:
        """The compare's verdict: fail if a check failed, else inconclusive if one could not be
        decided, else pass. Its exit code (``--allow-inconclusive`` included) is the CLI's
        (specbench/cli/exits.py)."""
        if self.failures:
            return Status.FAIL
        if self.inconclusive:
            return Status.INCONCLUSIVE
        return Status.PASS

    @property
    def tested(self) -> list[GateResult]:
        """Checks whose interval was held against the tolerance: pass, fail, or straddling it."""
        return [g for g in self.checks if g.tested]

    @property
    def decided(self) -> int:
        """Checks the run-level correction covers: every check with an interval (pass or fail, and
        the ones then found undecided: they were tested, their failure would have stood)."""
        if self.family is not None:
            return self.family
        return len(self.tested)

    @property
    def undecided(self) -> list[GateResult]:
        """Checks that did not fail and are not known within their tolerance: their interval straddles it."""
        return [g for g in self.checks if g.undecided]

    @property
    def error_control(self) -> dict[str, Any]:
        """Which false-alarm rate the verdict holds: method, scope, level and the number of checks."""
        alpha = (1 - self.confidence) / 2
        return {
            "method": "holm" if self.holm else "none",
            "scope": "run" if self.holm else "check",
            "alpha_one_sided": round(alpha, 6),
            "checks": self.decided,
            "inconclusive_not_tested": len([g for g in self.inconclusive if not g.undecided]),
        }

    @property
    def error_rate(self) -> str:
        """Which false-alarm rate the gates control, in words."""
        alpha = (1 - self.confidence) / 2 * 100
        m = self.decided
        n = len(self.undecided)
        also = f" ({n} of them not decided: their interval straddles the tolerance)" if n else ""
        if self.holm:
            return (
                f"false alarms: <= {alpha:.3g}% one-sided for the whole compare, Holm over all {m} decided "
                f"checks (every cell x every gate line){also}"
            )
        return (
            f"false alarms: <= {alpha:.3g}% one-sided per check, no correction (--no-holm): over {m} checks "
            f"a false alarm somewhere is up to {min(100.0, m * alpha):.3g}% likely{also}"
        )

    def to_dict(self, exit_code: int) -> dict[str, Any]:
        """The JSON form (``--json``); ``exit_code`` is the one the process ends with (the CLI's)."""

        def row(r: MetricRow) -> dict[str, Any]:
            d = {k: v for k, v in asdict(r).items() if k not in ("metric", "replicates")}
            d.update(
                unit=r.metric.unit,
                higher_is_better=r.metric.higher_is_better,
                rel=r.rel,
                ci=None if r.ci is None else list(r.ci),
            )
            return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

        return {
            "baseline": self.base_label,
            "candidate": self.cand_label,
            "exit_code": exit_code,
            "confidence": self.confidence,
            "n_resamples": self.n_resamples,
            "gates": self.gates,
            "default_gates": self.default_gates,
            "checks": self.counts,
            "error_rate": self.error_rate,
            "error_control": self.error_control,
            "holm": self.holm,
            "allow_inconclusive": self.allow_inconclusive,
            "undecided": len(self.undecided),
            "cannot_fail": len(self.cannot_fail),
            "regressions": [asdict(g) for g in self.failures],
            "inconclusive": [asdict(g) for g in self.inconclusive],
            "unmatched_gates": [asdict(g) for g in self.unmatched],
            "cells": [
                {
                    **{
                        k: v for k, v in asdict(c).items() if k not in ("rows", "gates", "key", "is_baseline", "blocks")
                    },
                    "blocked": [b.reason for b in c.blocks],
                    "metrics": [row(r) for r in c.rows],
                    "gates": [asdict(g) for g in c.gates],
                }
                for c in self.cells
            ],
            "only_in_baseline": self.only_base,
            "only_in_candidate": self.only_cand,
            "mismatches": self.mismatches,
            "warnings": self.warnings,
        }

"""Simulated acceptance streams with known truth, for the gate's tests and its power study
(benchmarks/gate_power.py imports it from here: test support, not shipped in the package).

Each draft is a Bernoulli chain: position i is accepted iff every earlier one was and a uniform
draw falls below the conditional rate alpha_i = p_i / p_(i-1) (with ``spread`` 0,
E[accepted_per_position[i] / D] is exactly p_i). Drafts are grouped into request units; ``spread`` adds a per-request shift of the
rates on the logit scale, because real prompts differ in how predictable they are and that
clustering is what the request bootstrap has to absorb.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from specbench.analysis.rates import total
from specbench.compare import compare_sides, parse_gate
from specbench.compare.sides import Side, SideCell
from specbench.records.counts import Counts
from specbench.records.files import Manifest
from specbench.records.requests import requests_of


def simulate_units(
    p: list[float],
    n_units: int,
    drafts_per_unit: int,
    rng: np.random.Generator,
    spread: float = 0.0,
    shifts: np.ndarray | None = None,
) -> list[Counts]:
    """``n_units`` request units of ``drafts_per_unit`` drafts each, true unconditional rates ``p``.

    ``shifts`` (one per unit) fixes the per-request logit shifts instead of drawing them: the same
    shifts on two sides model the same prompts run twice (paired comparisons)."""
    rates = np.asarray(p, dtype=float)
    if np.any(np.diff(rates) > 0) or rates[0] > 1 or rates[-1] < 0:
        raise ValueError("p must be non-increasing fractions")
    k = len(rates)
    alpha = rates / np.concatenate([[1.0], rates[:-1]])
    logit = np.log(alpha / (1 - alpha + 1e-12) + 1e-12)
    if shifts is not None:
        shift = np.asarray(shifts, dtype=float).reshape(n_units, 1)
    else:
        shift = rng.normal(0.0, spread, size=(n_units, 1)) if spread else np.zeros((n_units, 1))
    unit_alpha = 1 / (1 + np.exp(-(logit[None, :] + shift)))  # (n_units, k)
    draws = rng.random((n_units, drafts_per_unit, k)) < unit_alpha[:, None, :]
    accepted = np.cumprod(draws, axis=2)  # position i counts only if 0..i all accepted
    per_pos = accepted.sum(axis=1)  # (n_units, k)
    return [
        Counts(
            num_drafts=drafts_per_unit,
            draft_tokens=drafts_per_unit * k,
            accepted_tokens=int(row.sum()),
            accepted_per_position=[int(x) for x in row],
            num_spec_tokens=k,
        )
        for row in per_pos
    ]


# The MDC study (tests/compare/test_detectable.py, benchmarks/gate_error_rates.py): one cell, 20
# prompts of 40 drafts, prompts differing in difficulty (fixed logit shifts, the same on both
# sides: paired by prompt), gate ``per_position[*]:0`` (3 checks, Holm over 3). p_0 straddles 0.5
# (0.54 before, ~0.47 after), so the drop leaves its spread as measured, which the MDC assumes.
MDC_P = [0.54, 0.35, 0.2]
MDC_PROMPTS, MDC_DRAFTS = 20, 40
MDC_SHIFTS = np.random.default_rng(5).normal(0.0, 0.5, size=MDC_PROMPTS)


def mdc_shifts(prompts: int) -> np.ndarray:
    """The prompts' fixed logit shifts (MDC_SHIFTS at the study's 20 prompts)."""
    return np.random.default_rng(5).normal(0.0, 0.5, size=prompts)


def mdc_side(label: str, p: list[float], rng: np.random.Generator, prompts: int = MDC_PROMPTS):
    """One side of the MDC study: a Side with one cell of per-request counts named by prompt."""

    units = simulate_units(p, prompts, MDC_DRAFTS, rng, shifts=mdc_shifts(prompts))
    cell = SideCell(
        key=(),
        name="cell",
        axes={},
        cell_ids=["c"],
        units=units,
        unit_kind="request",
        k=3,
        exact=total(units),
        requests=requests_of([{"prompt_id": f"p{i}", "spec_decode": u.to_dict()} for i, u in enumerate(units)]),
    )
    return Side(path=Path(label), label=label, manifest=Manifest(run_id=label, cells=[]), cells={(): cell})


def mdc_power(
    pilots: int, trials: int, rng: np.random.Generator, prompts: int = MDC_PROMPTS
) -> tuple[float, dict[str, float], set[str]]:
    """(median MDC printed for p_0 over ``pilots`` A/A compares, {figure: detection rate when the
    true drop of p_0 equals it} over ``trials`` compares each, the error-control lines printed).

    The figures: "mdc" (what compare prints now) and "tolerance + half-width" (what it printed
    before issue 29). At fewer prompts than the study's 20 the drop can pass p_1 and p_2, which are
    then capped at the new p_0 (unconditional p_i never rise with i)."""
    from scipy.optimize import brentq
    from scipy.special import expit, logit

    gates = [parse_gate("per_position[*]:0")]
    shifts = mdc_shifts(prompts)

    def p0_check(comp):
        return next(g for g in comp.checks if g.metric == "per_position[0]")

    def true_p0(p0: float) -> float:  # expected pooled p_0 of the prompts (equal drafts each)
        return float(expit(logit(p0) + shifts).mean())

    def side(label: str, p: list[float]):
        return mdc_side(label, p, rng, prompts)

    pilot = [p0_check(compare_sides(side("b", MDC_P), side("c", MDC_P), gates)) for _ in range(pilots)]
    mdc = float(np.median([g.mdc for g in pilot]))
    half_width_mdc = float(np.median([student_t.ppf(0.975, g.df) * g.se for g in pilot]))
    rates = {}
    for name, drop in (("mdc", mdc), ("tolerance + half-width", half_width_mdc)):
        p0 = brentq(lambda x: true_p0(MDC_P[0]) - true_p0(x) - drop, 1e-3, MDC_P[0])  # noqa: B023
        if prompts == MDC_PROMPTS:
            assert abs(p0 + MDC_P[0] - 1) < 0.03  # the drop straddles 0.5
        cand = [p0, *(min(p, p0) for p in MDC_P[1:])]
        hits = sum(
            p0_check(compare_sides(side("b", MDC_P), side("c", cand), gates)).status == "fail" for _ in range(trials)
        )
        rates[name] = hits / trials
    return mdc, rates, {g.control for g in pilot}

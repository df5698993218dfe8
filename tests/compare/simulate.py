"""Simulated acceptance streams with known truth, for the gate's tests and its power study
(benchmarks/gate_power.py imports it from here: test support, not shipped in the package).

Each draft is a Bernoulli chain: position i is accepted iff every earlier one was and a uniform
draw falls below the conditional rate alpha_i = p_i / p_(i-1) (with ``spread`` 0,
E[accepted_per_position[i] / D] is exactly p_i). Drafts are grouped into request units; ``spread`` adds a per-request shift of the
rates on the logit scale, because real prompts differ in how predictable they are and that
clustering is what the request bootstrap has to absorb.
"""

from __future__ import annotations

import numpy as np

from specbench.analysis.acceptance import Counts


def simulate_units(p: list[float], n_units: int, drafts_per_unit: int, rng: np.random.Generator,
                   spread: float = 0.0, shifts: np.ndarray | None = None) -> list[Counts]:
    """``n_units`` request units of ``drafts_per_unit`` drafts each, true unconditional rates ``p``.

    ``shifts`` (one per unit) fixes the per-request logit shifts instead of drawing them: the same
    shifts on two sides model the same prompts run twice (paired comparisons)."""
    p = np.asarray(p, dtype=float)
    if np.any(np.diff(p) > 0) or p[0] > 1 or p[-1] < 0:
        raise ValueError("p must be non-increasing fractions")
    k = len(p)
    alpha = p / np.concatenate([[1.0], p[:-1]])
    logit = np.log(alpha / (1 - alpha + 1e-12) + 1e-12)
    if shifts is not None:
        shift = np.asarray(shifts, dtype=float).reshape(n_units, 1)
    else:
        shift = rng.normal(0.0, spread, size=(n_units, 1)) if spread else np.zeros((n_units, 1))
    unit_alpha = 1 / (1 + np.exp(-(logit[None, :] + shift)))  # (n_units, k)
    draws = rng.random((n_units, drafts_per_unit, k)) < unit_alpha[:, None, :]
    accepted = np.cumprod(draws, axis=2)  # position i counts only if 0..i all accepted
    per_pos = accepted.sum(axis=1)  # (n_units, k)
    return [Counts(num_drafts=drafts_per_unit, draft_tokens=drafts_per_unit * k,
                   accepted_tokens=int(row.sum()), accepted_per_position=[int(x) for x in row], num_spec_tokens=k)
            for row in per_pos]

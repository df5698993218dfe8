"""The committed runs' speculative cells as populations of requests (test support; the coverage
test and benchmarks/ci_coverage.py draw from them).

A population is one committed cell's per-request counts (requests.jsonl ``spec_decode``); its true
statistics are those of its summed counts (ratio of sums, never a mean of rates). A simulated cell
draws ``n`` requests with replacement and computes the per-cell interval over them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from specbench.analysis.deltas import paired_acceptance_deltas
from specbench.analysis.intervals import cell_intervals, common_k, count_matrix, count_stats
from specbench.records.counts import Counts
from specbench.testing import BASELINES


def populations(root: Path = BASELINES) -> dict[str, list[Counts]]:
    """``{"study/cell": [per-request Counts]}`` of every committed cell with per-request counts."""
    out = {}
    for path in sorted(root.glob("*/*/requests.jsonl")):
        units = []
        for line in path.read_text().splitlines():
            sd = json.loads(line).get("spec_decode")
            if sd and sd.get("num_drafts"):
                acc = sd["accepted_per_position"]
                units.append(Counts(sd["num_drafts"], sd["draft_tokens"], sd["accepted_tokens"], acc, len(acc)))
        if units:
            out[f"{path.parent.parent.name}/{path.parent.name}"] = units
    return out


def coverage(units: list[Counts], n: int, draws: int, rng: np.random.Generator) -> dict[str, tuple[float, float, int]]:
    """``{statistic: (coverage, share without an interval, cells with one)}`` of the per-cell
    interval over ``n`` requests drawn with replacement, against the population's pooled value.

    A draw whose statistic is undefined (alpha_i with nothing accepted at i-1) has no interval:
    it is counted apart (the check is inconclusive there), not as covering."""
    k = common_k(units)
    pop = count_matrix(units, k)
    true = {key: float(v) for key, v in count_stats(pop.sum(axis=0), k).items()}
    hits = {key: 0 for key in true}
    given = {key: 0 for key in true}
    for _ in range(draws):
        iv = cell_intervals([units[i] for i in rng.integers(0, len(units), n)])
        for key, value in true.items():
            lo, hi = iv[key]
            if math.isnan(lo):
                continue
            given[key] += 1
            hits[key] += lo <= value <= hi
    return {
        key: (hits[key] / given[key] if given[key] else math.nan, 1 - given[key] / draws, given[key])
        for key in true
        if math.isfinite(true[key])
    }


def paired_delta_coverage(
    base: list[Counts], cand: list[Counts], n: int, draws: int, rng: np.random.Generator
) -> dict[str, tuple[float, int]]:
    """``{statistic: (coverage, draws with an interval)}`` of compare's paired change interval when
    ``n`` prompts are drawn with replacement and each side takes those prompts' requests from its
    own cell (the cells sent the same prompts in the same order); truth = the difference of the
    two populations' summed-count statistics."""

    k = min(common_k(base), common_k(cand))
    tb, tc = (count_stats(count_matrix(u, k).sum(axis=0), k) for u in (base, cand))
    hits: dict[str, int] = {}
    given: dict[str, int] = {}
    for _ in range(draws):
        idx = rng.integers(0, len(base), n)
        deltas = paired_acceptance_deltas(
            {str(j): base[i] for j, i in enumerate(idx)}, {str(j): cand[i] for j, i in enumerate(idx)}
        )
        for key, d in deltas.items():
            true = float(tc[key] - tb[key])
            if d.ci is None or not math.isfinite(true):
                continue
            given[key] = given.get(key, 0) + 1
            hits[key] = hits.get(key, 0) + (d.ci[0] <= true <= d.ci[1])
    return {key: (hits[key] / given[key], given[key]) for key in given}

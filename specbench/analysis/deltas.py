"""Intervals for the change ``cand - base`` that keep their level at 2-20 units.

Why not the percentile bootstrap: with 2-5 units (pooled repeats, log windows) its one-sided
false-alarm rate was measured at 14% / 9% / 5-6% where 2.5% is meant (issue 11). A bootstrap-t
is unstable there too (a resample of 3 units often holds one distinct unit: SE 0).

Acceptance statistics are smooth functions of summed counts (ratio estimators), so they get a
**studentized t interval with jackknife standard errors**: leave one unit out, recompute the
statistic from the remaining sums, take the jackknife variance; Welch-Satterthwaite degrees of
freedom for two independent sides. When both sides carry per-request counts with prompt ids the
change is **paired by prompt**: a unit is a prompt (a cluster: every request and repeat of that
prompt, on both sides), one prompt is left out of both sides at once, df = prompts - 1. Repeated
prompts and repeats are then never counted as independent; the paired interval also takes MOVER's
limits from the two cells' score intervals where they are wider (:func:`paired_acceptance_deltas`
says why). The A/A simulation test
(tests/compare/test_false_alarms.py) measures the one-sided false-alarm rate at 3-20 units.

Latency medians are not smooth (the jackknife is inconsistent for a median): they get a BCa
bootstrap over requests (scipy.stats.bootstrap); their replicates give the percentile p-value the
run-level (Holm) correction needs.
"""

from __future__ import annotations

import math
import warnings as _warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from specbench.analysis.intervals import (
    cell_intervals,
    common_k,
    count_matrix,
    count_stats,
    jackknife_var,
    jackknife_vars,
    t_quantile,
    within_var,
)
from specbench.records.counts import Counts

# Delta.method of the paired acceptance change (compare's JSON/Markdown/JUnit print it)
PAIRED_MOVER = "MOVER of the two cells' score intervals with the pairing correlation, at least the jackknife t"


@dataclass
class Delta:
    """The change ``cand - base`` of one statistic and how sure we are of it.

    ``ci`` is None when there are too few units (``why`` says so). ``se``/``df`` are set for
    t intervals, ``replicates`` (bootstrap replicates of the change) for bootstrap intervals:
    either gives the check its p-value, and so the run-level Holm correction.
    """

    point: float | None
    ci: tuple[float, float] | None = None
    se: float | None = None
    df: float | None = None
    method: str = ""
    why: str = ""
    replicates: np.ndarray | None = None


def _t_ci(point: float, se: float, df: float, confidence: float) -> tuple[float, float]:
    h = t_quantile(confidence, df) * se
    return point - h, point + h


def _finite(*xs: float) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def acceptance_deltas(
    base: list[Counts], cand: list[Counts], confidence: float = 0.95, floor: bool = True
) -> dict[str, Delta]:
    """Unpaired: each side's units independent (windows, repeats, requests without prompt ids).

    ``floor`` False for repeats as units (compare's between-run path): a repeat pools a whole load,
    so the repeats' own spread is the between-run variance they are there to measure; the
    within-draw floor with df = min(n) - 1 = 1 from two repeats made every two-repeat check blind
    (a 46% AL drop passed: tests/results/test_sweep.py)."""
    k = common_k(base, cand)
    mb, mc = count_matrix(base, k), count_matrix(cand, k)
    pb, pc = count_stats(mb.sum(axis=0), k), count_stats(mc.sum(axis=0), k)
    jb = count_stats(mb.sum(axis=0) - mb, k) if len(base) >= 2 else None
    jc = count_stats(mc.sum(axis=0) - mc, k) if len(cand) >= 2 else None
    fb, fc = within_var(mb.sum(axis=0), k), within_var(mc.sum(axis=0), k)
    out = {}
    for key in pb:
        point = float(pc[key] - pb[key])
        if not _finite(point):
            out[key] = Delta(None, why="not defined on both sides")
            continue
        if jb is None or jc is None:
            out[key] = Delta(
                point, why=f"too few units for an interval ({len(base)} vs {len(cand)}; needs >= 2 per side)"
            )
            continue
        vb, vc = jackknife_var(jb[key]), jackknife_var(jc[key])
        if not _finite(vb, vc):
            out[key] = Delta(point, why="not defined in every leave-one-out subset")
            continue
        within = fb.get(key, math.nan) + fc.get(key, math.nan) if floor else math.nan
        se = math.sqrt(_floored(vb + vc, within, point))
        df = _conservative_df(len(base), len(cand))
        out[key] = Delta(
            point,
            _t_ci(point, se, df, confidence),
            se,
            df,
            f"t (df min(n)-1), jackknife SE, {len(base)} vs {len(cand)} units",
        )
    return out


def _floored(var_jackknife: float, var_within: float, point: float) -> float:
    """The change's variance: the jackknife's, but never below the two sides' within-draw sampling
    variance (:func:`~specbench.analysis.intervals.within_var`). Why: drawn from the committed
    default study's cells, a change between two different cells (true change known from their
    requests) was covered < 93% in 237 of 718 cell pair x statistic x size cases at 3-10 prompts,
    down to 68% (p_2 and alpha_2 near 0: 0 in every prompt drawn, jackknife SE 0); with the floor
    in 22 (benchmarks/gate_error_rates.py prints the figure). Every unit showing the same change
    (20 copies of one request) keeps its jackknife variance of 0: that is too few distinct units,
    and a zero-width interval around a change never decides; the floor must not turn it into a
    verdict."""
    if var_jackknife == 0 and point != 0:
        return var_jackknife
    return max(var_jackknife, var_within) if math.isfinite(var_within) else var_jackknife


def _conservative_df(nb: int, nc: int) -> float:
    # The conservative bound of Welch's df (min(n) - 1), not the Satterthwaite estimate: at 3-10
    # units the estimate rides on two noisy jackknife variances, and the A/A simulation measured
    # 3.3% one-sided false alarms at 10 units per side with it (2.5% meant); with the bound, at or
    # below 2.5% from 2 to 20 units.
    return float(min(nb, nc) - 1)


def paired_acceptance_deltas(
    base: dict[str, Counts], cand: dict[str, Counts], confidence: float = 0.95
) -> dict[str, Delta]:
    """Paired by prompt: ``{prompt_id: counts summed over that prompt's requests and repeats}``.

    The point is the change of the pooled statistic (all prompts of both sides); the jackknife
    leaves one prompt out of both sides together, so the prompt-to-prompt spread shared by the two
    sides cancels out of the standard error. df = prompts - 1.

    The interval is the wider, on each side, of that t (within-draw floor included) and MOVER's
    limits from the two cells' own score intervals (:func:`_mover`). Why: drawn from the committed
    default study, the t alone covered a real change between two cells < 93% in 19 of 690 cell pair
    x statistic x size cases at 3-10 prompts, all with the MLA-on logits-only cell (p_2 rests on two
    outlier requests of 20, which most draws miss: lowest 79.8%); MOVER alone 87.5% at 3 prompts
    (r from 3 prompts is noisy); the wider of the two >= 98.2% in every case
    (benchmarks/gate_error_rates.py, section 5), at a printed MDC of 0.091 for 0.088 (docs/methods.md).
    """
    ids = sorted(set(base) | set(cand))
    zero = Counts(0, 0, 0, None)
    k = common_k(list(base.values()), list(cand.values()))
    # a prompt missing on one side is a row of zeros there (it adds nothing to that side's sums)
    mb = count_matrix([base.get(i, zero) for i in ids], k)
    mc = count_matrix([cand.get(i, zero) for i in ids], k)
    pb, pc = count_stats(mb.sum(axis=0), k), count_stats(mc.sum(axis=0), k)
    n = len(ids)
    keys = list(pb)
    spread = _leave_one_prompt_out(mb, mc, k, keys) if n >= 2 else None
    fb, fc = within_var(mb.sum(axis=0), k), within_var(mc.sum(axis=0), k)
    ib = cell_intervals([base.get(i, zero) for i in ids], confidence) if n >= 2 else {}
    ic = cell_intervals([cand.get(i, zero) for i in ids], confidence) if n >= 2 else {}
    out = {}
    for key in keys:
        point = float(pc[key] - pb[key])
        if not _finite(point):
            out[key] = Delta(None, why="not defined on both sides")
            continue
        if spread is None:
            out[key] = Delta(point, why=f"too few prompts for an interval ({n}; needs >= 2)")
            continue
        variances, correlations = spread
        out[key] = _paired_delta(
            point,
            variances[key],
            within=fb.get(key, math.nan) + fc.get(key, math.nan),
            sides=(float(pb[key]), float(pc[key])),
            side_intervals=(ib.get(key), ic.get(key)),
            r=correlations[key],
            n=n,
            confidence=confidence,
        )
    return out


def _leave_one_prompt_out(
    mb: np.ndarray, mc: np.ndarray, k: int, keys: list[str]
) -> tuple[dict[str, float], dict[str, float]]:
    """Per statistic, the jackknife variance of the paired change and the two sides' correlation."""
    lb, lc = (count_stats(m.sum(axis=0) - m, k) for m in (mb, mc))
    # every statistic at once (numpy's per-call cost dominated)
    loo_b = np.column_stack([lb[key] for key in keys])
    loo_c = np.column_stack([lc[key] for key in keys])
    with np.errstate(invalid="ignore"):
        variances = dict(zip(keys, jackknife_vars(loo_c - loo_b).tolist()))
    correlations = dict(zip(keys, _correlations(loo_b, loo_c).tolist()))
    return variances, correlations


def _paired_delta(
    point: float,
    var: float,
    *,
    within: float,
    sides: tuple[float, float],
    side_intervals: tuple[tuple[float, float] | None, tuple[float, float] | None],
    r: float,
    n: int,
    confidence: float,
) -> Delta:
    if not _finite(var):
        return Delta(point, why="not defined in every leave-one-prompt-out subset")
    se = math.sqrt(_floored(var, within, point))
    lo, hi = _t_ci(point, se, n - 1, confidence)
    side_b, side_c = side_intervals
    if se == 0 or side_b is None or side_c is None or not _finite(*side_b, *side_c):
        # a zero-width t interval stays zero-width (never decides: _floored); a side with fewer
        # than 2 prompts with trials for the statistic has no score interval: the t alone
        return Delta(point, (lo, hi), se, float(n - 1), f"paired by prompt, t with jackknife SE, {n} prompts")
    m_lo, m_hi = _mover(*sides, side_b, side_c, r)
    lo, hi = min(lo, m_lo), max(hi, m_hi)
    return Delta(
        point,
        (lo, hi),
        (hi - lo) / (2 * t_quantile(confidence, n - 1)),  # the p-value's SE: the mean half-width
        float(n - 1),
        f"paired by prompt, {PAIRED_MOVER}, {n} prompts",
    )


def _correlations(loo_b: np.ndarray, loo_c: np.ndarray) -> np.ndarray:
    """Per column (statistic), the correlation of the two sides' leave-one-prompt-out values (the
    pairing correlation MOVER subtracts); 0 when a side's values do not vary (nothing to correlate)
    or are not finite."""
    db, dc = loo_b - loo_b.mean(axis=0), loo_c - loo_c.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        den = np.sqrt(np.sum(db * db, axis=0) * np.sum(dc * dc, axis=0))
        r = np.where(den > 0, np.sum(db * dc, axis=0) / np.where(den > 0, den, 1.0), 0.0)
    return np.where(np.isfinite(r), np.clip(r, -1.0, 1.0), 0.0)


def _mover(tb: float, tc: float, ib: tuple[float, float], ic: tuple[float, float], r: float) -> tuple[float, float]:
    """MOVER limits of ``tc - tb`` from each side's own interval (Zou & Donner 2008, eq. for a
    difference of correlated estimates; Newcombe 1998 with r = 0): each limit takes the distance
    to the matching limit of each side, ``d - sqrt(a^2 + b^2 - 2 r a b)``."""
    d = tc - tb
    a, b = tc - ic[0], ib[1] - tb
    lo = d - math.sqrt(max(a * a + b * b - 2 * r * a * b, 0.0))
    a, b = ic[1] - tc, tb - ib[0]
    return lo, d + math.sqrt(max(a * a + b * b - 2 * r * a * b, 0.0))


def median_delta(
    base: list[float],
    cand: list[float],
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    min_units: int = 5,
) -> Delta:
    """Change of the median over requests, BCa bootstrap (two independent samples)."""
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    point = float(np.median(c) - np.median(b))
    if len(b) < min_units or len(c) < min_units:
        return Delta(
            point, why=f"too few requests for an interval ({len(b)} vs {len(c)}; needs >= {min_units} per side)"
        )
    ci, replicates = _bca(
        (c, b), lambda c, b, axis: np.median(c, axis=axis) - np.median(b, axis=axis), confidence, n_resamples, seed
    )
    if ci is None:
        return Delta(point, why="the bootstrap distribution is degenerate (ties)")
    return Delta(point, ci, method=f"BCa bootstrap of the median, {len(b)} vs {len(c)} requests", replicates=replicates)


def _bca(
    data: tuple[np.ndarray, ...], statistic: Callable[..., Any], confidence: float, n_resamples: int, seed: int
) -> tuple[tuple[float, float] | None, np.ndarray]:
    from scipy.stats import bootstrap

    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")  # degenerate distributions warn and give nan: handled below
        res = bootstrap(
            data,
            statistic,
            vectorized=True,
            paired=False,
            confidence_level=confidence,
            n_resamples=n_resamples,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return ((lo, hi) if _finite(lo, hi) else None), np.asarray(res.bootstrap_distribution, dtype=float)


def ratio_rel_se(num: list[float], den: list[float]) -> float | None:
    """Jackknife SE of log(Σ num / Σ den): the relative SE of a ratio estimator over units."""
    x, y = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if len(x) < 2 or y.sum() <= 0 or x.sum() <= 0:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = np.log((x.sum() - x) / (y.sum() - y))
    var = jackknife_var(loo)
    return math.sqrt(var) if _finite(var) else None


def scaled_delta(
    b: float, c: float, rel_se_b: float | None, rel_se_c: float | None, nb: int, nc: int, confidence: float, method: str
) -> Delta:
    """``c - b`` with SE from each side's relative SE (throughput: point from the load summary)."""
    point = c - b
    if rel_se_b is None or rel_se_c is None:
        return Delta(point, why="too few units for an interval")
    vb, vc = (b * rel_se_b) ** 2, (c * rel_se_c) ** 2
    se = math.sqrt(vb + vc)
    df = _conservative_df(nb, nc)
    return Delta(point, _t_ci(point, se, df, confidence), se, df, method)


def mean_delta(base: list[float], cand: list[float], confidence: float = 0.95) -> Delta:
    """Change of the mean of per-repeat values (Welch t)."""
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    point = float(c.mean() - b.mean())
    if len(b) < 2 or len(c) < 2:
        return Delta(point, why=f"too few repeats for an interval ({len(b)} vs {len(c)})")
    vb, vc = float(b.var(ddof=1) / len(b)), float(c.var(ddof=1) / len(c))
    se = math.sqrt(vb + vc)
    df = _conservative_df(len(b), len(c))
    return Delta(point, _t_ci(point, se, df, confidence), se, df, f"Welch t over repeats, {len(b)} vs {len(c)}")


def bootstrap_p(harm_replicates: np.ndarray, tol: float) -> float:
    """Percentile-bootstrap p-value of H0 "true harm <= tol": the share of replicates at or inside
    the tolerance (+1 in numerator and denominator, so it is never 0 from finitely many)."""
    h = np.asarray(harm_replicates, dtype=float)
    h = h[np.isfinite(h)]
    return float((1 + np.count_nonzero(h <= tol)) / (1 + len(h)))


def one_sided_p(harm: float, tol: float, se: float, df: float) -> float:
    """P-value of H0 "true harm <= tol" against "harm > tol" (t test)."""
    # scipy.special's stdtr is what scipy.stats.t.sf computes (t's _sf is stdtr(df, -x)), bit for
    # bit, without the distribution object's per-call argument checks (~40x the cost: a compare
    # computes one p-value per check, the gate's simulations hundreds of thousands).
    from scipy.special import stdtr

    if se <= 0:
        return 0.0 if harm > tol else 1.0
    return float(stdtr(df, -(harm - tol) / se))

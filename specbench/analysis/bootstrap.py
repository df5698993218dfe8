"""Confidence intervals for acceptance statistics (ratio estimator over units).

A unit is a window (log line), a request or a prompt. Statistics are always recomputed from
SUMMED counts, so no rate is ever averaged.

Per-cell intervals (acceptance.json, `report`, `compare --plot`, the precision-driven load) are
:func:`jackknife_t`: t with a jackknife SE, the interval the regression gate uses for changes.
Why not the percentile :func:`bootstrap`: over few units it is too narrow. Simulated with
overdispersed units (tests/analysis/test_ci_coverage.py), the 95% bootstrap covered ~75% at 3
units, ~82% at 5 and ~88% at 10; the jackknife-t 90-95% at each. A cell's units are often few:
log windows, when vLLM has no per-request counts (before 0.32), one per stats interval.
:func:`bootstrap` stays for resampling whole studies (speed-ups, where no smooth formula exists).
"""

from __future__ import annotations

import functools
import math
import warnings as _warnings

import numpy as np

from specbench.analysis.counts import Counts


JACKKNIFE_T = "jackknife-t"  # t with a jackknife SE over units, df = units - 1


class Intervals(dict):
    """``{statistic: (low, high)}`` plus how it was obtained.

    ``degenerate`` is True when there were too few units (one) to say anything about spread:
    the intervals are then ``(x, x)`` and must not be read as precision.
    """

    def __init__(self, *args, n_units: int = 0, n_resamples: int = 0, confidence: float = 0.95,
                 point: dict[str, float] | None = None, degenerate: bool = False, method: str = "percentile bootstrap",
                 half_width: dict[str, float] | None = None):
        super().__init__(*args)
        self.method = method
        self.half_width = half_width or {}  # jackknife_t only: t * SE before any clip
        self.n_units = n_units
        self.n_resamples = n_resamples
        self.confidence = confidence
        self.point = point or {}
        self.degenerate = degenerate


def _matrix(units: list[Counts]) -> tuple[np.ndarray, int]:
    """Rows [D, draft_tokens, A, acc_pos_0..k-1]; k = 0 when positions are not known for all units."""
    lens = {len(u.accepted_per_position) if u.accepted_per_position is not None else -1 for u in units}
    k = lens.pop() if len(lens) == 1 else -1
    k = max(k, 0)
    rows = [[u.num_drafts, u.draft_tokens, u.accepted_tokens] + (list(u.accepted_per_position) if k else [])
            for u in units]
    return np.asarray(rows, dtype=np.float64), k


def count_stats(sums: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Statistics from summed count columns; works on one row or on a (B, cols) matrix."""
    d, t, a = sums[..., 0], sums[..., 1], sums[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {"mean_acceptance_length": 1 + a / d, "draft_acceptance_rate": a / t}
        p = [sums[..., 3 + i] / d for i in range(k)]
        for i in range(k):
            out[f"p{i}"] = p[i]
        for i in range(k):
            out[f"a{i}"] = p[0] if i == 0 else p[i] / p[i - 1]
    return out


def point_estimates(units: list[Counts]) -> dict[str, float]:
    """The statistics of the pooled counts, keyed like :func:`bootstrap`'s intervals."""
    m, k = _matrix(units)
    return {name: float(v) for name, v in count_stats(m.sum(axis=0), k).items()}


def resample_weights(n: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(n_resamples, n): how often each of n units is drawn in each resample (with replacement).

    Sums over a resample are then one matrix product ``weights @ columns``; bincount is ~10x faster
    than drawing multinomials."""
    idx = rng.integers(0, n, size=(n_resamples, n)) + (np.arange(n_resamples) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=n_resamples * n).reshape(n_resamples, n)


# Weights held at once (~4 MB with the draws behind them): a log with 400,000 windows and 2,000
# resamples would otherwise need two 6 GB matrices. Rows drawn batch by batch are the same draws.
_BATCH_ELEMENTS = 1 << 18


def resampled_sums(m: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resample_weights(len(m), n_resamples, rng) @ m`` in bounded memory (same result)."""
    n = len(m)
    step = max(1, _BATCH_ELEMENTS // max(n, 1))
    return np.concatenate([resample_weights(n, min(step, n_resamples - i), rng) @ m
                           for i in range(0, n_resamples, step)])


def _resampled(units: list[Counts], n_resamples: int, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], int]:
    m, k = _matrix(units)
    return count_stats(resampled_sums(m, n_resamples, rng), k), k


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    with _warnings.catch_warnings():  # all-nan columns (e.g. alpha_i after p_(i-1) = 0) give nan, on purpose
        _warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanquantile(values, [alpha, 1 - alpha])
    return float(lo), float(hi)


@functools.lru_cache(maxsize=256)
def t_quantile(confidence: float, df: float) -> float:
    """Two-sided ``confidence`` quantile of Student's t (cached: df is an integer here)."""
    # scipy.special's stdtrit is what scipy.stats.t.ppf computes (t's _ppf), bit for bit; importing
    # scipy.stats instead loads ~500 modules (~58 MB RSS) that `report` needs for nothing else.
    from scipy.special import stdtrit

    return float(stdtrit(df, 1 - (1 - confidence) / 2))


def jackknife_var(loo: np.ndarray) -> float:
    """Jackknife variance from the ``n`` leave-one-out values of a statistic."""
    n = len(loo)
    return float((n - 1) / n * np.sum((loo - loo.mean()) ** 2))


def count_matrix(units: list[Counts], k: int) -> np.ndarray:
    """Rows [D, draft_tokens, A, acc_pos_0..k-1] (positions truncated to k; k = 0 drops them)."""
    return np.asarray([[u.num_drafts, u.draft_tokens, u.accepted_tokens] + list((u.accepted_per_position or [0] * k)[:k])
                       for u in units], dtype=np.float64).reshape(len(units), 3 + k)


def common_k(*sides: list[Counts]) -> int:
    """Positions known for every unit of every side (0 when any unit lacks them)."""
    lens = [len(u.accepted_per_position) if u.accepted_per_position is not None else 0 for s in sides for u in s
            if u.num_drafts]
    return min(lens) if lens else 0


def jackknife_t(units: list[Counts], confidence: float = 0.95) -> Intervals:
    """t intervals for AL, DAR, p_i, alpha_i over ``units``: point = the statistic of the summed
    counts; SE = jackknife (leave one unit out, recompute from the remaining sums); df = units - 1.

    Each interval is ``point ± half_width``, clipped to the statistic's range (rates and p_i in
    [0, 1]; AL in [1, 1 + drafted tokens per draft]): the true value lies in that range, so the
    clip never removes it, and a rate printed as [-0.001, 0.011] would read as a bug.
    ``half_width`` keeps the unclipped t * SE (the precision-driven load stops on it: a clip must
    not make an interval look more precise than it is). One unit gives ``(x, x)`` marked
    ``degenerate``; a statistic undefined in some leave-one-out sum (e.g. alpha_i when one unit
    held every accepted token at i-1) gets ``(nan, nan)``."""
    if not units:
        raise ValueError("jackknife_t needs at least one unit")
    k = common_k(units)
    m = count_matrix(units, k)
    sums = m.sum(axis=0)
    point = {name: float(v) for name, v in count_stats(sums, k).items()}
    n = len(units)
    if n == 1:
        return Intervals({key: (v, v) for key, v in point.items()}, n_units=1, confidence=confidence, point=point,
                         degenerate=True, method=JACKKNIFE_T, half_width={key: math.nan for key in point})
    with np.errstate(invalid="ignore", divide="ignore"):
        loo = count_stats(sums - m, k)
        al_max = 1 + sums[1] / sums[0] if sums[0] else math.inf
    t = t_quantile(confidence, n - 1)
    out: dict[str, tuple[float, float]] = {}
    half: dict[str, float] = {}
    for key, x in point.items():
        h = half[key] = t * math.sqrt(jackknife_var(loo[key]))
        lo, hi = (1.0, al_max) if key == "mean_acceptance_length" else (0.0, 1.0)
        out[key] = (max(x - h, lo), min(x + h, hi)) if math.isfinite(h) and math.isfinite(x) else (math.nan, math.nan)
    return Intervals(out, n_units=n, confidence=confidence, point=point, method=JACKKNIFE_T, half_width=half)


def bootstrap(units: list[Counts], n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95) -> Intervals:
    """Percentile intervals for AL, DAR, p_i, alpha_i from resampled units (deterministic in ``seed``)."""
    if not units:
        raise ValueError("bootstrap needs at least one unit")
    point = point_estimates(units)
    if len(units) == 1:
        return Intervals({k: (v, v) for k, v in point.items()}, n_units=1, n_resamples=0,
                         confidence=confidence, point=point, degenerate=True)
    stats, _ = _resampled(units, n_resamples, np.random.default_rng(seed))
    return Intervals({k: percentile_interval(v, confidence) for k, v in stats.items()}, n_units=len(units),
                     n_resamples=n_resamples, confidence=confidence, point=point)


def bootstrap_delta(base: list[Counts], cand: list[Counts], n_resamples: int = 2000, seed: int = 0,
                    confidence: float = 0.95) -> Intervals:
    """Intervals for ``cand - base`` of each statistic, resampling both sides independently.

    ``point`` holds the observed differences; ``degenerate`` is set when either side has one unit
    (that side then does not vary, so the interval understates the uncertainty).
    """
    if not base or not cand:
        raise ValueError("bootstrap_delta needs at least one unit on each side")
    pb, pc = point_estimates(base), point_estimates(cand)
    keys = [k for k in pb if k in pc]
    point = {k: pc[k] - pb[k] for k in keys}
    rng = np.random.default_rng(seed)
    sb = _resampled(base, n_resamples, rng)[0] if len(base) > 1 else {k: np.full(n_resamples, pb[k]) for k in keys}
    sc = _resampled(cand, n_resamples, rng)[0] if len(cand) > 1 else {k: np.full(n_resamples, pc[k]) for k in keys}
    intervals = {k: percentile_interval(sc[k] - sb[k], confidence) for k in keys}
    return Intervals(intervals, n_units=min(len(base), len(cand)), n_resamples=n_resamples, confidence=confidence,
                     point=point, degenerate=len(base) == 1 or len(cand) == 1)


def significant(interval: tuple[float, float]) -> bool:
    """True when a delta interval excludes 0."""
    lo, hi = interval
    return bool(lo > 0 or hi < 0)


__all__ = ["JACKKNIFE_T", "Intervals", "bootstrap", "bootstrap_delta", "common_k", "count_matrix", "jackknife_t",
           "jackknife_var", "percentile_interval", "point_estimates", "resample_weights", "resampled_sums",
           "significant", "t_quantile"]

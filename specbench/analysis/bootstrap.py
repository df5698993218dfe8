"""Bootstrap confidence intervals for acceptance statistics (ratio estimator over units).

A unit is a window (log line) or a request. Each resample draws units with replacement, SUMS their
counts and recomputes every statistic from the sums, so no rate is ever averaged. Vectorised: the
resamples are multinomial weight rows, and the sums one matrix product.
"""

from __future__ import annotations

import warnings as _warnings

import numpy as np

from specbench.analysis.counts import Counts


class Intervals(dict):
    """``{statistic: (low, high)}`` plus how it was obtained.

    ``degenerate`` is True when there were too few units (one) to say anything about spread:
    the intervals are then ``(x, x)`` and must not be read as precision.
    """

    def __init__(self, *args, n_units: int = 0, n_resamples: int = 0, confidence: float = 0.95,
                 point: dict[str, float] | None = None, degenerate: bool = False):
        super().__init__(*args)
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


__all__ = ["Intervals", "bootstrap", "bootstrap_delta", "percentile_interval", "point_estimates", "resample_weights",
           "resampled_sums",
           "significant"]

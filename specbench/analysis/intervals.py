"""Confidence intervals for acceptance statistics (ratio estimator over units): the statistics' one
home with :mod:`specbench.analysis.deltas` (the change between two cells, used by compare), next to
the windows, speed-up, divergence and k prediction modules of this package.

A unit is a window (log line), a request or a prompt. Statistics are always recomputed from
SUMMED counts, so no rate is ever averaged.

Per-cell intervals (acceptance.json, `report`, `compare --plot`, the precision-driven load) are
:func:`cell_intervals` (a score interval with a jackknife design effect, see its docstring for why;
it replaced the jackknife-t). Why not the percentile :func:`bootstrap`: over few units it is
too narrow. Simulated with overdispersed units (tests/analysis/test_ci_coverage.py), the 95%
bootstrap covered ~75% at 3 units, ~82% at 5 and ~88% at 10. A cell's units are often few: log
windows, when vLLM has no per-request counts (before 0.32), one per stats interval.
:func:`bootstrap` stays for resampling whole studies (speed-ups, where no smooth formula exists).
"""

from __future__ import annotations

import functools
import math
import warnings as _warnings

import numpy as np

from specbench.records.counts import Counts

JACKKNIFE_T = "jackknife-t"  # the per-cell interval before the score interval (older acceptance.json)
# Up to this many units the two pseudo-units have a unit's average size; beyond it they shrink as
# PSEUDO_UNITS_UP_TO / n. Coverage is what the issue asks of 3-10 units (rare prompts a sample
# misses); at 20 units full-size pseudo-units made the default study's intervals 1.4-3.9x the
# jackknife-t's width (shrunk: 1.1-2.2x), and no longer separated cells that plainly differ.
PSEUDO_UNITS_UP_TO = 10
SCORE_JACKKNIFE = "score, jackknife design effect"  # Intervals.method of :func:`cell_intervals`


class Intervals(dict):
    """``{statistic: (low, high)}`` plus how it was obtained.

    ``degenerate`` is True when there were too few units (one) to say anything about spread:
    the intervals are then ``(x, x)`` and must not be read as precision.
    """

    def __init__(
        self,
        *args,
        n_units: int = 0,
        n_resamples: int = 0,
        confidence: float = 0.95,
        point: dict[str, float] | None = None,
        degenerate: bool = False,
        method: str = "percentile bootstrap",
        half_width: dict[str, float] | None = None,
    ):
        super().__init__(*args)
        self.method = method
        self.half_width = half_width or {}  # cell_intervals only: t * SE before any clip
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
    rows = [
        [u.num_drafts, u.draft_tokens, u.accepted_tokens] + (list(u.accepted_per_position or []) if k else [])
        for u in units
    ]
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
    return np.concatenate(
        [resample_weights(n, min(step, n_resamples - i), rng) @ m for i in range(0, n_resamples, step)]
    )


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


def jackknife_vars(loo: np.ndarray) -> np.ndarray:
    """Jackknife variance of each column of ``(n, statistics)`` leave-one-out values (of the one
    statistic when ``loo`` is 1-D)."""
    n = loo.shape[0]
    return (n - 1) / n * np.sum((loo - loo.mean(axis=0)) ** 2, axis=0)


def jackknife_var(loo: np.ndarray) -> float:
    """Jackknife variance from the ``n`` leave-one-out values of a statistic."""
    return float(jackknife_vars(loo))


def count_matrix(units: list[Counts], k: int) -> np.ndarray:
    """Rows [D, draft_tokens, A, acc_pos_0..k-1] (positions truncated to k; k = 0 drops them)."""
    return np.asarray(
        [
            [u.num_drafts, u.draft_tokens, u.accepted_tokens] + list((u.accepted_per_position or [0] * k)[:k])
            for u in units
        ],
        dtype=np.float64,
    ).reshape(len(units), 3 + k)


def common_k(*sides: list[Counts]) -> int:
    """Positions known for every unit of every side (0 when any unit lacks them)."""
    lens = [
        len(u.accepted_per_position) if u.accepted_per_position is not None else 0
        for s in sides
        for u in s
        if u.num_drafts
    ]
    return min(lens) if lens else 0


def _length_var(sums: np.ndarray, k: int) -> float:
    """Variance of one draft's accepted length L from summed counts. Accepted lengths are prefixes
    (position i only after 0..i-1), so P(L > i) = p_i and E[L^2] = Σ (2i+1) p_i; without positions,
    Bhatia-Davis: Var(L) <= E[L] (r - E[L]) for L in [0, r], r = drafted tokens per draft."""
    d, t, a = (float(v) for v in sums[:3])
    if d <= 0:
        return 0.0
    if not k:
        return max((a / d) * (t / d - a / d), 0.0)
    p = sums[3 : 3 + k] / d
    return max(float(np.sum((2 * np.arange(k) + 1) * p) - p.sum() ** 2), 0.0)


def within_var(sums: np.ndarray, k: int) -> dict[str, float]:
    """Sampling variance of each statistic of one side's summed counts from its draws alone
    (drafts independent, no unit-to-unit spread): the floor under a jackknife variance, which is 0
    when every unit drawn shows the same rate (a p_i that is 0 in each of 3 requests). Proportions
    are shrunk, ``(x + 1/2) / (trials + 1)``, so a 0 still has a variance."""
    d, t, a = (float(v) for v in sums[:3])
    out: dict[str, float] = {}

    def var(x: float, trials: float) -> float:
        if trials <= 0:
            return math.nan
        q = (x + 0.5) / (trials + 1)
        return q * (1 - q) / trials

    if d > 0 and t > 0:
        r = t / d
        out["draft_acceptance_rate"] = max(var(a, t), _length_var(sums, k) / (r * r) / d)
        out["mean_acceptance_length"] = r * r * out["draft_acceptance_rate"]
    for i in range(k):
        out[f"p{i}"] = var(float(sums[3 + i]), d)
        out[f"a{i}"] = var(float(sums[3 + i]), d if i == 0 else float(sums[2 + i]))
    return out


def _score(q: float, n_eff: float, c: float) -> tuple[float, float]:
    """Wilson's score interval for a proportion ``q`` seen over ``n_eff`` (effective) trials."""
    if n_eff <= 0:
        return 0.0, 1.0
    den = 1 + c * c / n_eff
    mid = (q + c * c / (2 * n_eff)) / den
    h = c / den * math.sqrt(max(q * (1 - q), 0.0) / n_eff + c * c / (4 * n_eff * n_eff))
    # exactly 0 / 1 at the ends: float rounding must not exclude a true value of 0 or 1
    return (0.0 if q <= 0 else max(0.0, mid - h)), (1.0 if q >= 1 else min(1.0, mid + h))


def _unit_vars(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per column of ``(units, statistics)`` successes ``x`` and trials ``y``: the jackknife variance
    of ``Σx / Σy`` over the units with trials plus two pseudo-units of their average size (shrinking
    past ``PSEUDO_UNITS_UP_TO`` units), one with none of its trials a success and one with all: an
    unseen kind of unit (a prompt the head never gets right, one it always does) then still widens
    the interval. Every statistic of a cell in one pass: per statistic, numpy's per-call cost on a
    few dozen units was most of a cell's interval (and of the simulations that measure it)."""
    valid = y > 0
    cnt = valid.sum(axis=0)
    xv, yv = np.where(valid, x, 0.0), np.where(valid, y, 0.0)
    trials = yv.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        size = trials / cnt * np.minimum(1.0, PSEUDO_UNITS_UP_TO / cnt)
        sx, sy = xv.sum(axis=0) + size, trials + 2 * size
        # leave-one-out ratios: each unit with trials, then the pseudo-units (0 of size, size of size)
        loo = np.vstack([(sx - xv) / (sy - yv), sx / (sy - size), (sx - size) / (sy - size)])
        keep = np.vstack([valid, np.ones((2, x.shape[1]), dtype=bool)])
        n = cnt + 2
        mean = np.where(keep, loo, 0.0).sum(axis=0) / n
        return (n - 1) / n * np.where(keep, (loo - mean) ** 2, 0.0).sum(axis=0)


def cell_intervals(units: list[Counts], confidence: float = 0.95) -> Intervals:
    """The per-cell interval for AL, DAR, p_i, alpha_i over ``units`` (acceptance.json, report,
    compare's plots, the precision-driven load's stop rule: one function everywhere).

    Each statistic is a proportion of summed counts, ``q = Σ successes / Σ trials`` (p_i: accepted
    at i per draft; alpha_i: accepted at i per accepted at i-1; DAR: accepted per drafted token;
    AL = 1 + (drafted tokens per draft) * DAR). Its interval is Wilson's score interval with the
    trials divided by a design effect, with the t quantile (df = units with trials - 1) for z. The
    design effect is the larger of (a) the jackknife variance over the units, plus two pseudo-units
    of average size at 0 and at 1 (unit-level Agresti-Coull), and (b) the within-unit variance of
    one draft (accepted lengths are prefixes: E[L^2] = Σ (2i+1) p_i), each over the binomial
    variance q(1-q)/trials, and at least 1. Why not a plain jackknife-t (the interval before):
    with 3-10 requests drawn from the committed cells it covered 85-89% for AL of a logits-only
    head and 11-31% for p_2 with output norm off (a p_i near 0 is 0 in most requests: SE 0, width
    0). The score form keeps a width at q = 0 or 1, the pseudo-units cover prompts the sample
    missed; benchmarks/ci_coverage.py measures >= 98% for every statistic of every committed cell
    at 3, 5 and 10 units (>= 85% at 20-40, where the pseudo-units shrink; docs/methods.md), at
    1.1-2.2x the jackknife-t's width at 20 units. Fewer than 2 units with trials give no interval. The interval always lies inside the
    statistic's range and holds the point (the statistic of the summed counts).

    ``half_width`` is the longer side, ``max(high - point, point - low)`` (the precision rule
    stops on it). One unit gives ``(x, x)`` marked ``degenerate``; a statistic undefined in the
    summed counts (alpha_i when nothing was accepted at i-1) gets ``(nan, nan)``."""
    if not units:
        raise ValueError("cell_intervals needs at least one unit")
    k = common_k(units)
    return matrix_intervals(count_matrix(units, k), k, confidence)


def matrix_intervals(m: np.ndarray, k: int, confidence: float = 0.95) -> Intervals:
    """:func:`cell_intervals` of the units whose counts are the rows of ``m`` (:func:`count_matrix`
    of them at ``k`` positions): a prefix of the rows is the interval over the first units."""
    sums = m.sum(axis=0)
    point = {name: float(v) for name, v in count_stats(sums, k).items()}
    n = len(m)
    if n == 1:
        return Intervals(
            {key: (v, v) for key, v in point.items()},
            n_units=1,
            confidence=confidence,
            point=point,
            degenerate=True,
            method=SCORE_JACKKNIFE,
            half_width={key: math.nan for key in point},
        )
    c = t_quantile(confidence, n - 1)
    d, t = sums[0], sums[1]
    # (successes, trials) per unit, and one draft's variance where the counts give it
    parts: dict[str, tuple[np.ndarray, np.ndarray, float | None]] = {}
    r = t / d if d else math.nan
    parts["draft_acceptance_rate"] = (m[:, 2], m[:, 1], _length_var(sums, k) / (r * r) / d if d else None)
    for i in range(k):
        parts[f"p{i}"] = (m[:, 3 + i], m[:, 0], None)
        parts[f"a{i}"] = (m[:, 3 + i], m[:, 0] if i == 0 else m[:, 2 + i], None)
    out: dict[str, tuple[float, float]] = {}
    half: dict[str, float] = {}
    xs = np.column_stack([x for x, _, _ in parts.values()])
    ys = np.column_stack([y for _, y, _ in parts.values()])
    unit_vars = _unit_vars(xs, ys)
    successes, all_trials = xs.sum(axis=0), ys.sum(axis=0)
    informatives = np.count_nonzero(ys, axis=0)
    for col, (key, (_, _, var_within)) in enumerate(parts.items()):
        trials = float(all_trials[col])
        q = point[key]
        # units with trials for this statistic (alpha_2 only has them where a 2nd token was accepted)
        informative = int(informatives[col])
        if informative < 2 or not math.isfinite(q):
            out[key], half[key] = (math.nan, math.nan), math.nan
            continue
        # the binomial variance at the pseudo-units' shrunk proportion, never 0: at q = 0 (no
        # request drawn accepted at i) a design effect must still widen the interval
        size = trials / informative * min(1.0, PSEUDO_UNITS_UP_TO / informative)  # as in _unit_vars
        shrunk = (float(successes[col]) + size) / (trials + 2 * size)
        binom = shrunk * (1 - shrunk) / trials
        deff = 1.0
        for v in (float(unit_vars[col]), var_within):
            if v is not None and math.isfinite(v):
                deff = max(deff, v / binom)
        out[key] = _score(q, trials / deff, c if informative == n else t_quantile(confidence, informative - 1))
        half[key] = max(out[key][1] - q, q - out[key][0])
    if "draft_acceptance_rate" in out:  # AL - 1 = (T / D) * DAR exactly, for the pooled counts
        lo, hi = out["draft_acceptance_rate"]
        out["mean_acceptance_length"] = (1 + r * lo, 1 + r * hi)
        half["mean_acceptance_length"] = r * half["draft_acceptance_rate"]
    return Intervals(out, n_units=n, confidence=confidence, point=point, method=SCORE_JACKKNIFE, half_width=half)


def cumulative_intervals(
    units: list[Counts], key: str = "mean_acceptance_length", confidence: float = 0.95, max_points: int = 200
) -> list[tuple[int, float, float, float]]:
    """``(n, point, low, high)`` of statistic ``key`` over the first n units, at up to ``max_points``
    evenly spaced n (always the last): each the :func:`cell_intervals` of that prefix, so the last
    is the cell's own interval. One unit (or a statistic undefined so far) has no interval (nan).
    The counts are read once; a day-long log's windows cost ``max_points`` matrix passes."""
    if not units:
        return []
    k = common_k(units)
    m = count_matrix(units, k)
    ns = np.unique(np.linspace(1, len(units), num=min(len(units), max_points)).round().astype(int))
    out = []
    for n in ns:
        iv = matrix_intervals(m[:n], k, confidence)
        point = iv.point.get(key, math.nan)
        lo, hi = (math.nan, math.nan) if iv.degenerate else iv.get(key, (math.nan, math.nan))
        out.append((int(n), float(point), float(lo), float(hi)))
    return out


def bootstrap(units: list[Counts], n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95) -> Intervals:
    """Percentile intervals for AL, DAR, p_i, alpha_i from resampled units (deterministic in ``seed``)."""
    if not units:
        raise ValueError("bootstrap needs at least one unit")
    point = point_estimates(units)
    if len(units) == 1:
        return Intervals(
            {k: (v, v) for k, v in point.items()},
            n_units=1,
            n_resamples=0,
            confidence=confidence,
            point=point,
            degenerate=True,
        )
    stats, _ = _resampled(units, n_resamples, np.random.default_rng(seed))
    return Intervals(
        {k: percentile_interval(v, confidence) for k, v in stats.items()},
        n_units=len(units),
        n_resamples=n_resamples,
        confidence=confidence,
        point=point,
    )


def bootstrap_delta(
    base: list[Counts], cand: list[Counts], n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> Intervals:
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
    return Intervals(
        intervals,
        n_units=min(len(base), len(cand)),
        n_resamples=n_resamples,
        confidence=confidence,
        point=point,
        degenerate=len(base) == 1 or len(cand) == 1,
    )


def significant(interval: tuple[float, float]) -> bool:
    """True when a delta interval excludes 0."""
    lo, hi = interval
    return bool(lo > 0 or hi < 0)


__all__ = [
    "JACKKNIFE_T",
    "PSEUDO_UNITS_UP_TO",
    "SCORE_JACKKNIFE",
    "Intervals",
    "bootstrap",
    "bootstrap_delta",
    "common_k",
    "count_matrix",
    "cell_intervals",
    "jackknife_var",
    "jackknife_vars",
    "percentile_interval",
    "point_estimates",
    "resample_weights",
    "resampled_sums",
    "significant",
    "t_quantile",
    "within_var",
]

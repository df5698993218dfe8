"""Predict acceptance and speed-up at smaller k from one cell measured at k, check the prediction
against the run's other cells, and recommend a k only when it passes.

What the source cell (k speculative tokens) did not measure, predicted from what it did:

- **AL at k' <= k**: ``AL(k') = 1 + Σ_{i<k'} p_i`` with ``p_i`` the source cell's per-position
  acceptance. It assumes :data:`AL_ASSUMPTION`; it is not an identity (docs/studies/k-sweep.md): a draft
  wrong at every 4th token accepts p = [1, 1, 1] at k = 3, so AL(2) is predicted 3, but at k = 2 its
  steps alternate between 3 and 1 tokens (AL 2). At ``k' = k`` it is the invariant ``AL = 1 + Σ p_i``.
- **Step cost at k'**, in plain decode steps: ``c(k') = 1 + (c(k) - 1) · k' / k``, the line through
  two costs measured in the run: the baseline's plain decode step (k = 0) and the source cell's
  ``c(k) = t_verify / t_plain``. It assumes :data:`COST_ASSUMPTION` (on vLLM-CPU it misses: a
  verify step has a large fixed cost).
- **Speed-up at k'**: ``AL(k') / c(k')`` with the cost measured at k' where the run has a cell there,
  else the line's: decode-only, so the measured figure to hold it against is the TPOT speed-up of a
  cell at k'.

The checks: at every k' < k the run measured (a cell that differs from the source only in
``num_speculative_tokens``), the predicted AL and the line's step cost are held against the cell's
measured ones; a check passes when the CI of predicted − measured (paired where the cells sent the
same requests) includes 0. The recommended k is the k' with the highest predicted speed-up when its
CI lies above 1, and only when the prediction was checked at one k' at least and passed every
check; a prediction that failed a check, or that nothing checked, recommends nothing
(:attr:`KPrediction.failed_checks`, :attr:`KPrediction.checked`).

CIs: percentile bootstrap over requests, all cells resampled with the same request weights when
they sent the same requests (paired by repeat, id and prompt; the prompt mix cancels), else each
on its own. Sums first, then ratios.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specbench.analysis.intervals import percentile_interval, resample_weights
from specbench.analysis.speedup import N_BASE_COLUMNS, request_matrix
from specbench.records.requests import RequestRecord

_ONE, _OUT, _E2E, _TTFT, _D, _A = range(N_BASE_COLUMNS)

AL_ASSUMPTION = "acceptance of a draft token does not depend on where the verify step starts"
COST_ASSUMPTION = "a verify step with no draft tokens costs a plain decode step and the cost grows linearly in k"


@dataclass
class KPoint:
    """Predictions at one k' and, where a cell at k' was measured, its figures."""

    k: int
    al_pred: float
    al_pred_ci: tuple[float, float]
    cost_model: float
    cost_model_ci: tuple[float, float]
    speedup_pred: float  # AL(k') / c_model(k')
    speedup_pred_ci: tuple[float, float]
    cell: str | None = None  # the measured cell at k'
    al_meas: float = float("nan")
    al_meas_ci: tuple[float, float] = (float("nan"), float("nan"))
    al_diff_ci: tuple[float, float] = (float("nan"), float("nan"))  # predicted - measured, paired
    speedup_pred_meas_cost: float = float("nan")  # AL(k') / measured c(k'): only acceptance predicted
    speedup_pred_meas_cost_ci: tuple[float, float] = (float("nan"), float("nan"))
    cost_meas: float = float("nan")
    cost_meas_ci: tuple[float, float] = (float("nan"), float("nan"))
    cost_diff_ci: tuple[float, float] = (float("nan"), float("nan"))  # model - measured, paired
    tpot_speedup_meas: float = float("nan")  # at k' = k: the source cell's own
    tpot_speedup_meas_ci: tuple[float, float] = (float("nan"), float("nan"))

    @property
    def al_inside(self) -> bool | None:
        """Whether the predicted AL lies inside the measured cell's CI (None: no measured cell)."""
        return None if self.cell is None else _inside(self.al_pred, self.al_meas_ci)

    @property
    def al_holds(self) -> bool | None:
        """The AL check at k': whether the CI of predicted − measured AL includes 0 (None: no cell
        measured at k', or no interval)."""
        return None if self.cell is None else _includes_zero(self.al_diff_ci)

    @property
    def cost_holds(self) -> bool | None:
        """The step-cost check at k': whether the CI of the line's cost − the measured cost includes 0."""
        return None if self.cell is None else _includes_zero(self.cost_diff_ci)

    @property
    def speedup(self) -> float:
        """The predicted speed-up the recommendation uses: measured step cost where there is one."""
        return self.speedup_pred if self.cell is None else self.speedup_pred_meas_cost

    @property
    def speedup_ci(self) -> tuple[float, float]:
        return self.speedup_pred_ci if self.cell is None else self.speedup_pred_meas_cost_ci

    @property
    def speedup_inside(self) -> bool | None:
        """Whether the prediction with measured step cost lies inside the measured TPOT speed-up's CI."""
        return None if self.cell is None else _inside(self.speedup_pred_meas_cost, self.tpot_speedup_meas_ci)

    @property
    def model_speedup_inside(self) -> bool | None:
        """The same for the prediction with the cost model (nothing measured at k' used)."""
        return None if self.cell is None else _inside(self.speedup_pred, self.tpot_speedup_meas_ci)


@dataclass
class KPrediction:
    """Predictions from one source cell at k (against its baseline) for every k' in 1..k."""

    source: str
    baseline: str
    k: int
    points: list[KPoint]
    paired: bool
    confidence: float
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> KPoint:
        """The k' with the highest predicted speed-up (point estimate)."""
        return max(self.points, key=lambda p: -np.inf if np.isnan(p.speedup) else p.speedup)

    @property
    def checked(self) -> list[int]:
        """The k' at which the run measured a cell and both checks could be made."""
        return [p.k for p in self.points if p.al_holds is not None and p.cost_holds is not None]

    @property
    def failed_checks(self) -> list[tuple[int, str]]:
        """``(k', "al" | "cost")`` for every check the run's cells reject."""
        return [
            (p.k, what) for p in self.points for what, ok in (("al", p.al_holds), ("cost", p.cost_holds)) if ok is False
        ]

    @property
    def validated(self) -> bool:
        """Checked at one k' at least, and no check failed: the only prediction that may recommend."""
        return bool(self.checked) and not self.failed_checks

    @property
    def best_k(self) -> int | None:
        """The recommended k: the best k' when the prediction is :attr:`validated` and its speed-up CI
        lies above 1; None otherwise (a rejected or unchecked model, or a point estimate alone,
        recommends nothing)."""
        best = self.best
        return best.k if self.validated and best.speedup_ci[0] > 1 else None


def _inside(x: float, ci: tuple[float, float]) -> bool:
    return bool(ci[0] <= x <= ci[1])


def _includes_zero(ci: tuple[float, float]) -> bool | None:
    if np.isnan(ci[0]) or np.isnan(ci[1]):
        return None
    return bool(ci[0] <= 0 <= ci[1])


def _order(keys: list[tuple], wanted: list[tuple]) -> list[int]:
    """Row indices that put rows keyed by ``keys`` in the order of ``wanted``."""
    index: dict[tuple, int] = {key: i for i, key in enumerate(keys)}
    return [index[key] for key in wanted]


def _decode(s: np.ndarray) -> np.ndarray:
    return s[..., _E2E] - s[..., _TTFT]


def predict_k(
    source: str,
    source_rows: list[RequestRecord],
    k: int,
    baseline: str,
    base_rows: list[RequestRecord],
    measured: dict[int, tuple[str, list[RequestRecord]]] | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> KPrediction:
    """Predict AL, step cost and speed-up at every k' <= ``k`` from ``source`` (see the module docstring).

    ``measured`` maps k' to a cell measured at k' (label, its requests), compared with the prediction.
    Raises ValueError when the source lacks per-request per-position counts or either cell has no
    finished requests.
    """
    measured = {kk: v for kk, v in (measured or {}).items() if 1 <= kk <= k}
    ks, ms, kb, mb = _source_and_base(source_rows, base_rows, k)
    others = {kk: request_matrix(rows) for kk, (_, rows) in measured.items()}
    paired, weights, mb, others = _resampling(ks, kb, mb, others, n_resamples, seed)
    point = _figures(ms.sum(axis=0), mb.sum(axis=0), {kk: m.sum(axis=0) for kk, (_, m) in others.items()}, k)
    reps = _figures(
        weights["src"] @ ms, weights["base"] @ mb, {kk: weights[kk] @ m for kk, (_, m) in others.items()}, k
    )
    ci = {key: percentile_interval(v, confidence) for key, v in reps.items()}
    points = [_point(kk, k, point, ci, measured) for kk in range(1, k + 1)]
    notes = [] if paired else ["cells sent different requests: each resampled on its own"]
    return KPrediction(
        source=source, baseline=baseline, k=k, points=points, paired=paired, confidence=confidence, notes=notes
    )


def _source_and_base(
    source_rows: list[RequestRecord], base_rows: list[RequestRecord], k: int
) -> tuple[list[tuple], np.ndarray, list[tuple], np.ndarray]:
    """Request keys and matrices of the source cell (k positions) and its baseline; ValueError when
    the prediction cannot be made from them."""
    ks, ms = request_matrix(source_rows, positions=k)
    kb, mb = request_matrix(base_rows, positions=0)
    if not len(ms) or not len(mb):
        raise ValueError("the prediction needs finished requests in the source cell and its baseline")
    if np.isnan(ms[:, N_BASE_COLUMNS:]).any() or np.isnan(ms[:, _D]).any():
        raise ValueError(
            "the prediction needs per-request accepted-per-position counts (--per-request-spec-decode-metrics)"
        )
    return ks, ms, kb, mb


def _resampling(
    ks: list[tuple],
    kb: list[tuple],
    mb: np.ndarray,
    others: dict[int, tuple[list[tuple], np.ndarray]],
    n_resamples: int,
    seed: int,
) -> tuple[bool, dict[str | int, np.ndarray], np.ndarray, dict[int, tuple[list[tuple], np.ndarray]]]:
    """Whether all cells sent the same requests, the bootstrap weights of each ("src", "base" and each
    measured k), and the baseline and measured matrices, in the source's row order when paired."""
    keysets = [kb] + [o[0] for o in others.values()]
    named = all(key[2] is not None for key in ks)
    paired = named and len(set(ks)) == len(ks) and all(sorted(x, key=repr) == sorted(ks, key=repr) for x in keysets)
    rng = np.random.default_rng(seed)
    weights: dict[str | int, np.ndarray]
    if paired:
        w = resample_weights(len(ks), n_resamples, rng)
        weights = {"src": w, "base": w, **{kk: w for kk in others}}
        mb = mb[_order(kb, ks)]
        others = {kk: (ks, m[_order(o, ks)]) for kk, (o, m) in others.items()}
    else:
        weights = {
            "src": resample_weights(len(ks), n_resamples, rng),
            "base": resample_weights(len(kb), n_resamples, rng),
            **{kk: resample_weights(len(o[0]), n_resamples, rng) for kk, o in others.items()},
        }
    return paired, weights, mb, others


def _figures(src: np.ndarray, base: np.ndarray, cells: dict[int, np.ndarray], k: int) -> dict[tuple, np.ndarray]:
    """Every figure from summed columns (one row of sums, or B rows of resampled sums)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t_plain = _decode(base) / (base[..., _OUT] - base[..., _ONE])
        c_src = _decode(src) / src[..., _D] / t_plain
        tpot_src = t_plain / (_decode(src) / (src[..., _OUT] - src[..., _ONE]))
        out: dict[tuple, np.ndarray] = {}
        p = [src[..., N_BASE_COLUMNS + i] / src[..., _D] for i in range(k)]
        for kk in range(1, k + 1):
            al = 1 + sum(p[:kk])
            cost = 1 + (c_src - 1) * kk / k
            out[("al_pred", kk)], out[("cost_model", kk)], out[("speedup_pred", kk)] = al, cost, al / cost
            if kk == k:
                out[("tpot_speedup_meas", kk)] = tpot_src
            if kk in cells:
                c = cells[kk]
                out[("al_meas", kk)] = 1 + c[..., _A] / c[..., _D]
                out[("al_diff", kk)] = al - out[("al_meas", kk)]
                out[("cost_meas", kk)] = _decode(c) / c[..., _D] / t_plain
                out[("cost_diff", kk)] = cost - out[("cost_meas", kk)]
                out[("speedup_pred_meas_cost", kk)] = al / out[("cost_meas", kk)]
                out[("tpot_speedup_meas", kk)] = t_plain / (_decode(c) / (c[..., _OUT] - c[..., _ONE]))
        return out


def _point(
    kk: int,
    k: int,
    point: dict[tuple, np.ndarray],
    ci: dict[tuple, tuple[float, float]],
    measured: dict[int, tuple[str, list[RequestRecord]]],
) -> KPoint:
    kp = KPoint(
        k=kk,
        al_pred=float(point[("al_pred", kk)]),
        al_pred_ci=ci[("al_pred", kk)],
        cost_model=float(point[("cost_model", kk)]),
        cost_model_ci=ci[("cost_model", kk)],
        speedup_pred=float(point[("speedup_pred", kk)]),
        speedup_pred_ci=ci[("speedup_pred", kk)],
    )
    if kk in measured:
        kp.cell = measured[kk][0]
        for name in ("al_meas", "cost_meas", "tpot_speedup_meas", "speedup_pred_meas_cost"):
            setattr(kp, name, float(point[(name, kk)]))
            setattr(kp, f"{name}_ci", ci[(name, kk)])
        kp.al_diff_ci, kp.cost_diff_ci = ci[("al_diff", kk)], ci[("cost_diff", kk)]
    elif kk == k:
        kp.tpot_speedup_meas = float(point[("tpot_speedup_meas", kk)])
        kp.tpot_speedup_meas_ci = ci[("tpot_speedup_meas", kk)]
    return kp

"""Speed-up of a speculative cell over its no-speculation baseline: measured, and decomposed.

Users care about speed, not acceptance: a higher acceptance length with a slower draft can lose.
All figures come from the load driver's client-side timings in ``requests.jsonl`` (``ttft_s``,
``e2e_s``, ``output_tokens``) and the per-request spec-decode counts (``spec_decode``), pooled
over requests as ratio estimators (sums first, then ratios; nothing is averaged across requests):

- ``output_tok_per_s`` = Σ output tokens / Σ e2e: each request's stream rate, pooled.
  Speed-up = spec / baseline. Under a closed loop with the same concurrency this is the load's
  throughput ratio.
- ``tpot_s`` (time per output token) = Σ (e2e - ttft) / Σ (output tokens - 1): decode time per
  token after the first. Speed-up = baseline / spec.
- ``e2e_s`` = mean end-to-end latency. Speed-up = baseline / spec.

Decomposition (not a prediction): one verify step emits AL tokens on average and costs
``t_verify`` = Σ (e2e - ttft) / Σ num_drafts of the spec cell; a plain decode step emits one
token and costs ``t_plain`` = the baseline's TPOT. So ``decomposition = AL / cost_ratio`` with
``cost_ratio = t_verify / t_plain``, the verify step's cost in plain decode steps and the AL at which
speculation breaks even. Both factors come from the same cell's timings, so the product equals the
measured TPOT speed-up up to the last step's clipped tokens (a factor (D + A) / Σ (out - 1), 1.01-1.02
in the committed runs): it says *why* a cell is as fast as it is (acceptance vs step cost), it
predicts nothing. Its gaps to the tok/s and e2e speed-ups are what speculation does not speed up
(prefill and time to first token, queueing, batching with other requests' verify steps) and the
client's own overhead. A real prediction, at other k, is :mod:`specbench.analysis.kpredict`.

CIs: percentile bootstrap over requests. When both cells sent the same requests (same repeat, id
and prompt), the resample draws request pairs (paired bootstrap: the prompt mix cancels); else
each cell is resampled on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specbench.analysis.intervals import percentile_interval, resample_weights
from specbench.model.requests import requests_of

SPEEDUPS = ("output_tok_per_s", "tpot", "e2e", "decomposition")
SPEEDUP_LABELS = {
    "output_tok_per_s": "output tok/s (measured)",
    "tpot": "time per output token (measured)",
    "e2e": "end-to-end latency (measured)",
    "decomposition": "decomposition AL ÷ cost ratio (≈ TPOT by construction)",
}
# columns of a cell's request matrix (accepted-per-position columns follow, when asked for)
_ONE, _OUT, _E2E, _TTFT, _D, _A = range(6)
N_BASE_COLUMNS = 6


def request_matrix(rows: list[dict[str, Any]] | list, positions: int = 0) -> tuple[list[tuple], np.ndarray]:
    """Keys ``(repeat, id, prompt_id)`` and columns [1, out, e2e, ttft, drafts, accepted] of the
    requests that finished with >= 2 tokens (drafts/accepted NaN without per-request counts), then
    ``positions`` columns of accepted-per-position counts (NaN where a request lacks them)."""
    keys, cols = [], []
    for r in requests_of(rows):
        if not r.ok or r.e2e_s is None or r.ttft_s is None:
            continue
        out = r.output_tokens
        if out is None or out < 2:
            continue
        sd = r.spec_decode
        d, a = (sd.num_drafts, sd.accepted_tokens) if sd is not None else (None, None)
        keys.append((r.repeat, r.id, r.prompt_id))
        pos = (sd.accepted_per_position if sd is not None else None) or []
        cols.append(
            [
                1.0,
                float(out),
                float(r.e2e_s),
                float(r.ttft_s),
                float("nan") if d is None else float(d),
                float("nan") if a is None else float(a),
            ]
            + [float(pos[i]) if i < len(pos) else float("nan") for i in range(positions)]
        )
    return keys, np.asarray(cols, dtype=np.float64).reshape(-1, N_BASE_COLUMNS + positions)


def cell_stats(sums: np.ndarray) -> dict[str, np.ndarray]:
    """Per-cell figures from summed columns; one row or a (B, 6) matrix of resampled sums."""
    with np.errstate(divide="ignore", invalid="ignore"):
        decode = sums[..., _E2E] - sums[..., _TTFT]
        return {
            "output_tok_per_s": sums[..., _OUT] / sums[..., _E2E],
            "tpot_s": decode / (sums[..., _OUT] - sums[..., _ONE]),
            "e2e_s": sums[..., _E2E] / sums[..., _ONE],
            "mean_acceptance_length": 1 + sums[..., _A] / sums[..., _D],
            "t_verify_s": decode / sums[..., _D],
        }


def speedups(spec: dict[str, np.ndarray], base: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Speed-ups (> 1 = speculation faster) and the cost ratio from two cells' :func:`cell_stats`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "output_tok_per_s": spec["output_tok_per_s"] / base["output_tok_per_s"],
            "tpot": base["tpot_s"] / spec["tpot_s"],
            "e2e": base["e2e_s"] / spec["e2e_s"],
            "decomposition": spec["mean_acceptance_length"] * base["tpot_s"] / spec["t_verify_s"],
            "cost_ratio": spec["t_verify_s"] / base["tpot_s"],
        }


def paired_order(ks: list[tuple], kb: list[tuple]) -> list[int] | None:
    """Row order of the baseline cell that lines its requests up with the spec cell's, or None
    when they are not the same requests."""
    # Paired only when both cells name the prompt of every request (llmperf rows carry no
    # prompt_id and sample their own prompts: their ids match across cells by position only).
    named = all(k[2] is not None for k in ks + kb)
    if not (named and sorted(ks, key=repr) == sorted(kb, key=repr) and len(set(ks)) == len(ks)):
        return None
    order = {k: i for i, k in enumerate(kb)}
    return [order[k] for k in ks]


def _resampled(
    spec: tuple[list[tuple], np.ndarray],
    base: tuple[list[tuple], np.ndarray],
    n_resamples: int,
    rng: np.random.Generator,
) -> tuple[dict[str, float], dict[str, np.ndarray], bool]:
    (ks, ms), (kb, mb) = spec, base
    if not len(ms) or not len(mb):
        raise ValueError("speed-up needs finished requests in both cells")
    point = {k: float(v) for k, v in speedups(cell_stats(ms.sum(axis=0)), cell_stats(mb.sum(axis=0))).items()}
    order = paired_order(ks, kb)
    paired = order is not None
    if paired:
        mb = mb[order]
        ws = wb = resample_weights(len(ks), n_resamples, rng)
    else:
        ws, wb = resample_weights(len(ks), n_resamples, rng), resample_weights(len(kb), n_resamples, rng)
    samples = speedups(cell_stats(ws @ ms), cell_stats(wb @ mb))
    return point, samples, paired


@dataclass
class Speedup:
    """One speculative cell against the baseline cell: figures, speed-ups and their CIs."""

    cell: str
    baseline: str
    n_spec: int
    n_base: int
    paired: bool
    spec: dict[str, float]
    base: dict[str, float]
    point: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    confidence: float
    load_ratio: float | None = None  # summary.json throughput ratio (whole load), point only
    notes: list[str] = field(default_factory=list)


def speedup(
    cell: str,
    spec_rows: list[dict[str, Any]],
    baseline: str,
    base_rows: list[dict[str, Any]],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    load_tok_per_s: tuple[float | None, float | None] = (None, None),
) -> Speedup:
    """Measured and decomposed speed-up of ``cell`` over ``baseline`` (see the module docstring).

    ``load_tok_per_s`` optionally gives both cells' whole-load throughput (summary.json) for a
    point ratio beside the per-request figures.
    """
    spec_m, base_m = request_matrix(spec_rows), request_matrix(base_rows)
    point, samples, paired = _resampled(spec_m, base_m, n_resamples, np.random.default_rng(seed))
    ms, mb = spec_m[1], base_m[1]
    spec = {k: float(v) for k, v in cell_stats(ms.sum(axis=0)).items()}
    base = {k: float(v) for k, v in cell_stats(mb.sum(axis=0)).items()}
    intervals = {k: percentile_interval(v, confidence) for k, v in samples.items()}
    notes = []
    if np.isnan(point["decomposition"]):
        notes.append("no per-request spec-decode counts: the decomposition needs --per-request-spec-decode-metrics")
    ls, lb = load_tok_per_s
    ratio = ls / lb if ls and lb else None
    return Speedup(
        cell=cell,
        baseline=baseline,
        n_spec=len(ms),
        n_base=len(mb),
        paired=paired,
        spec=spec,
        base=base,
        point=point,
        intervals=intervals,
        confidence=confidence,
        load_ratio=ratio,
        notes=notes,
    )

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

CIs: one method for every speed-up figure specbench shows (screen, report, plot, CSV) and the
one compare gates on (:mod:`specbench.compare.within_run`): a t interval on the log of the figure, its
standard error jackknifed over requests. When both cells sent the same requests (same repeat, id
and prompt), a request leaves the cell and its baseline together (paired: the prompt mix cancels),
df = n - 1; else each cell is jackknifed on its own and the variances add, df = min(n) - 1.

That interval covers request-to-request noise inside one run, not the machine: a cell and its
baseline run minutes apart, and reruns of the same configs on a shared 2-core VM moved speed-ups
by up to 2x (0.50x -> 1.0x; benchmarks/speedup_reruns.py, docs/methods.md "Speed-up across
reruns"), where the within-run interval covered the rerun's estimate in 6 of 42 cases. So the
interval is widened by a between-run spread ``rerun_sd`` on the log scale,
``se = sqrt(se_within^2 + rerun_sd^2)``: :data:`RERUN_SD`, the SD estimated over those reruns,
unless the caller gives its own (0: within this run only). ``Speedup.within`` keeps the within-run
interval beside it. Even widened it covered 28 of 42 held-out reruns (67%): a speed-up measured
apart from its baseline on a shared machine is known to within a factor of ~2, whatever its
request count.

Measured interleaved (``load.interleave``, specbench/run/interleave.py), a cell's baseline requests
are sent between its own in blocks, and every request carries its block: the interval is then
jackknifed over block pairs (:func:`by_block`; df = blocks - 1), as the requests of one block share
the machine's state, and needs no between-run widening (:data:`INTERLEAVED_RERUN_SD`; measured in
docs/methods.md). ``Speedup.rerun_range`` is where a rerun's estimate is expected: the interval's
SE times sqrt(2), as the rerun carries the same noise again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from specbench.analysis.intervals import jackknife_vars, t_quantile
from specbench.records.requests import RequestRecord, Rows, requests_of

SPEEDUPS = ("output_tok_per_s", "tpot", "e2e", "decomposition")
SPEEDUP_LABELS = {
    "output_tok_per_s": "output tok/s (measured)",
    "tpot": "time per output token (measured)",
    "e2e": "end-to-end latency (measured)",
    "decomposition": "decomposition AL ÷ cost ratio (≈ TPOT by construction)",
}
# Between-run spread of a speed-up's log on a shared 2-core VM: the SD a same-config rerun adds to
# the within-run noise, estimated over 21 cells of 4 pairs of reruns (benchmarks/speedup_reruns.py,
# docs/methods.md "Speed-up across reruns"): 0.326.
RERUN_SD = 0.33
RERUN_SOURCE = "same-config reruns on a shared 2-core VM (benchmarks/speedup_reruns.py)"
# The same for a cell measured interleaved in time with its baseline's server (load.interleave,
# specbench/run/interleave.py): what reruns of such cells moved beyond their within-run interval.
INTERLEAVED_RERUN_SD = 0.0
# columns of a cell's request matrix (accepted-per-position columns follow, when asked for)
_ONE, _OUT, _E2E, _TTFT, _D, _A = range(6)
N_BASE_COLUMNS = 6


def request_matrix(rows: Rows, positions: int = 0, blocks: bool = False) -> tuple[list[tuple], np.ndarray]:
    """Keys ``(repeat, id, prompt_id)`` and columns [1, out, e2e, ttft, drafts, accepted] of the
    requests that finished with >= 2 tokens (drafts/accepted NaN without per-request counts), then
    ``positions`` columns of accepted-per-position counts (NaN where a request lacks them).
    ``blocks``: keys end with the request's interleave block (None outside load.interleave), for
    :func:`log_se`. Records are read as they are; plain rows (tests, benchmarks) are validated here."""
    keys, cols = [], []
    for r in requests_of(rows):
        if not r.ok or r.e2e_s is None or r.ttft_s is None:
            continue
        out = r.output_tokens
        if out is None or out < 2:
            continue
        sd = r.spec_decode
        d, a = (sd.num_drafts, sd.accepted_tokens) if sd is not None else (None, None)
        keys.append((r.repeat, r.id, r.prompt_id, r.block) if blocks else (r.repeat, r.id, r.prompt_id))
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


def _log_figures(ms: np.ndarray, mb: np.ndarray) -> dict[str, np.ndarray]:
    """log of every speed-up figure (and the cost ratio) from summed columns; rows or one row."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return {k: np.log(v) for k, v in speedups(cell_stats(ms), cell_stats(mb)).items()}


def by_block(
    ks: list[tuple], ms: np.ndarray, kb: list[tuple], mb: np.ndarray
) -> tuple[list[tuple], np.ndarray, list[tuple], np.ndarray]:
    """Both cells' rows summed per interleave block when every request of both carries one (a cell
    measured with load.interleave against its baseline's requests: the block pair is the unit, as
    the machine's state is shared inside a block, not independent per request); else the rows as
    they are, keyed ``(repeat, id, prompt_id)``."""
    if not (ks and kb and all(len(k) == 4 and k[3] is not None for k in ks + kb)):
        return [k[:3] for k in ks], ms, [k[:3] for k in kb], mb

    def summed(keys: list[tuple], m: np.ndarray) -> tuple[list[tuple], np.ndarray]:
        groups: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            groups.setdefault((k[0], k[3]), []).append(i)
        out = [(rep, b, f"block {b}") for rep, b in groups]
        return out, np.stack([m[idx].sum(axis=0) for idx in groups.values()])

    return (*summed(ks, ms), *summed(kb, mb))


def matched_blocks(
    ks: list[tuple], ms: np.ndarray, kb: list[tuple], mb: np.ndarray
) -> tuple[list[tuple], np.ndarray, list[tuple], np.ndarray, int]:
    """Interleaved cells (every request of both carries its block): only the requests both sides
    finished, so each block pair sums the same prompts on both sides and no lost block unpairs the
    rest; the count of requests dropped. Other cells: as they are, 0."""
    if not (ks and kb and all(len(k) == 4 and k[3] is not None for k in ks + kb)):
        return ks, ms, kb, mb, 0
    both = {k[:2] for k in ks} & {k[:2] for k in kb}
    keep_s = [i for i, k in enumerate(ks) if k[:2] in both]
    keep_b = [i for i, k in enumerate(kb) if k[:2] in both]
    dropped = len(ks) + len(kb) - len(keep_s) - len(keep_b)
    return [ks[i] for i in keep_s], ms[keep_s], [kb[i] for i in keep_b], mb[keep_b], dropped


def log_se(ks: list[tuple], ms: np.ndarray, kb: list[tuple], mb: np.ndarray) -> tuple[dict[str, float], int, bool]:
    """Jackknife SE of each figure's log, its df and whether the requests were paired; over
    interleave blocks where every request of both cells carries one (:func:`by_block`)."""
    ks, ms, kb, mb = by_block(ks, ms, kb, mb)
    order = paired_order(ks, kb)
    ts, tb = ms.sum(axis=0), mb.sum(axis=0)
    with np.errstate(invalid="ignore"):
        if order is not None:
            loo = _log_figures(ts - ms, tb - mb[order]) if len(ms) >= 2 else None
            var = {k: float(jackknife_vars(v)) for k, v in loo.items()} if loo else {}
            df = len(ms) - 1
        else:
            var = {}
            if len(ms) >= 2 and len(mb) >= 2:
                one, other = _log_figures(ts - ms, tb), _log_figures(ts, tb - mb)
                var = {k: float(jackknife_vars(one[k]) + jackknife_vars(other[k])) for k in one}
            df = min(len(ms), len(mb)) - 1
    return {k: math.sqrt(v) for k, v in var.items() if math.isfinite(v)}, df, order is not None


def _interval(point: float, se: float | None, df: int, confidence: float) -> tuple[float, float]:
    if se is None or df < 1 or not (point > 0 and math.isfinite(point)):
        return (float("nan"), float("nan"))
    h = t_quantile(confidence, df) * se
    return (math.exp(math.log(point) - h), math.exp(math.log(point) + h))


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
    intervals: dict[str, tuple[float, float]]  # widened by the between-run spread
    confidence: float
    within: dict[str, tuple[float, float]] = field(default_factory=dict)  # this run's requests only
    rerun_sd: float = 0.0  # the between-run SD of the log the intervals carry
    load_ratio: float | None = None  # summary.json throughput ratio (whole load), point only
    notes: list[str] = field(default_factory=list)
    interleaved: bool = False  # the baseline's requests were sent interleaved with the cell's (load.interleave)
    df: int = 0  # the t interval's degrees of freedom: units (requests, or interleave blocks) - 1
    # where a rerun's estimate is expected (95%): the interval's SE times sqrt(2), as a rerun's own
    # estimate carries the same noise again (a 95% CI holds a rerun's estimate only ~83% of the time)
    rerun_range: dict[str, tuple[float, float]] = field(default_factory=dict)


def speedup(
    cell: str,
    spec_rows: list[RequestRecord],
    baseline: str,
    base_rows: list[RequestRecord],
    *,
    confidence: float = 0.95,
    rerun_sd: float = RERUN_SD,
    load_tok_per_s: tuple[float | None, float | None] = (None, None),
    interleaved: bool = False,
) -> Speedup:
    """Measured and decomposed speed-up of ``cell`` over ``baseline`` (see the module docstring).

    ``rerun_sd``: the between-run SD of the log the interval is widened by (0: within-run only).
    ``load_tok_per_s`` optionally gives both cells' whole-load throughput (summary.json) for a
    point ratio beside the per-request figures.
    """
    (ks, ms), (kb, mb) = request_matrix(spec_rows, blocks=True), request_matrix(base_rows, blocks=True)
    ks, ms, kb, mb, dropped = matched_blocks(ks, ms, kb, mb)
    if not len(ms) or not len(mb):
        raise ValueError("speed-up needs finished requests in both cells")
    spec = {k: float(v) for k, v in cell_stats(ms.sum(axis=0)).items()}
    base = {k: float(v) for k, v in cell_stats(mb.sum(axis=0)).items()}
    point = {k: float(np.exp(v)) for k, v in _log_figures(ms.sum(axis=0), mb.sum(axis=0)).items()}
    se, df, paired = log_se(ks, ms, kb, mb)
    within = {k: _interval(point[k], se.get(k), df, confidence) for k in point}
    wide = {k: _interval(point[k], math.hypot(se[k], rerun_sd) if k in se else None, df, confidence) for k in point}
    rerun = {
        k: _interval(point[k], math.sqrt(2) * math.hypot(se[k], rerun_sd) if k in se else None, df, confidence)
        for k in point
    }
    notes = []
    if dropped:
        notes.append(f"{dropped} request(s) finished on one side only: left out of both (interleaved pairs)")
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
        intervals=wide,
        confidence=confidence,
        within=within,
        rerun_sd=rerun_sd,
        load_ratio=ratio,
        notes=notes,
        interleaved=interleaved,
        df=df,
        rerun_range=rerun,
    )


def speedups_method(found: list[Speedup]) -> str:
    """:func:`interval_method` of each kind of speed-up in ``found`` (measured apart from the
    baseline, or interleaved with it), or of the defaults for none."""
    if not found:
        return interval_method(0.95, RERUN_SD)
    kinds = [(s.confidence, s.rerun_sd, s.interleaved) for s in found]
    return "; ".join(interval_method(*k) for k in dict.fromkeys(kinds))


def interval_method(confidence: float, rerun_sd: float, interleaved: bool = False) -> str:
    """How a speed-up's interval was made, in words (for tables, plots and the screen)."""
    if interleaved:
        base = (
            f"{confidence:.0%} t interval on the log, jackknife over blocks of requests sent to the cell and "
            "its baseline's server in turn (load.interleave)"
        )
    else:
        base = f"{confidence:.0%} t interval on the log, jackknife over requests (paired by prompt where both cells sent the same)"
    if not rerun_sd:
        return base + ("" if interleaved else "; within this run only: a rerun may differ by more")
    return base + f", widened by a between-run SD of {rerun_sd:g} on the log ({RERUN_SOURCE})"

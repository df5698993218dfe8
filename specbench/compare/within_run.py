"""Compare metrics measured against a run's own baseline cell: speed-up and divergence share.

Both sides of a comparison carry their own no-speculation baseline cell; each speculative cell's
figure is taken against the baseline of its own run, then the two runs' figures are compared:

- ``speedup``: output tok/s of the cell over its run's baseline cell (Σ output tokens / Σ e2e over
  requests, see :mod:`specbench.analysis.speedup`), higher is better.
- ``divergence_share``: share of prompts whose greedy output differs from the run's baseline cell
  (see :mod:`specbench.analysis.divergence`), lower is better: speculation should not change text.

CI of the speed-up's change: a t interval with jackknife standard errors (issue 29). Each side's
log speed-up is jackknifed over its prompts (a prompt's request left out of the cell and of its
baseline together, when both cells sent the same requests; else each cell on its own), the change
gets the delta-method SE ``sqrt((b se_b)^2 + (c se_c)^2)`` and df = min(units) - 1; se/df give the
check's p-value (run-level Holm). Why not the percentile bootstrap it replaced: drawn from the
committed default study's requests (benchmarks/gate_error_rates.py), its one-sided A/A false
alarms were 12% / 8.5% / 4.2% at 2 / 3 / 5 requests per cell (2.5% meant); at 1 request it had
zero width. One request per side now gives no interval (inconclusive).

``divergence_share``: each side's share is bootstrapped over its prompts, the two sides
independently, and the percentile interval of the difference of the replicates is taken; the
replicates give its p-value.
"""

from __future__ import annotations

import numpy as np

from specbench.analysis.deltas import Delta, scaled_delta
from specbench.analysis.divergence import compare_outputs
from specbench.analysis.intervals import percentile_interval, resample_weights
from specbench.analysis.speedup import cell_stats, log_se, matched_blocks, request_matrix, speedups
from specbench.records.requests import Rows


def speedup_figure(rows: Rows, base: Rows) -> tuple[float, float | None, int] | None:
    """(output tok/s speed-up of ``rows`` over ``base``, jackknife SE of its log or None, units):
    the within-run part of the interval :func:`specbench.analysis.speedup.speedup` shows."""
    ks, ms = request_matrix(rows, blocks=True)
    kb, mb = request_matrix(base, blocks=True)
    ks, ms, kb, mb, _ = matched_blocks(ks, ms, kb, mb)
    if not len(ms) or not len(mb):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        point = float(speedups(cell_stats(ms.sum(axis=0)), cell_stats(mb.sum(axis=0)))["output_tok_per_s"])
    se, df, _ = log_se(ks, ms, kb, mb)
    return point, se.get("output_tok_per_s"), df + 1


def speedup_delta(
    base_rows: Rows,
    base_ref: Rows,
    cand_rows: Rows,
    cand_ref: Rows,
    confidence: float = 0.95,
) -> tuple[float, float, Delta] | None:
    """(base speed-up, cand speed-up, the change's t interval); None when a side has no figure."""
    b, c = speedup_figure(base_rows, base_ref), speedup_figure(cand_rows, cand_ref)
    if b is None or c is None:
        return None
    d = scaled_delta(
        b[0],
        c[0],
        b[1],
        c[1],
        b[2],
        c[2],
        confidence,
        f"t (df min(n)-1), jackknife SE of the log speed-up over prompts (interleave blocks where the cell "
        f"has them), {b[2]} vs {c[2]}",
    )
    if d.ci is None:
        d.why = f"too few requests for an interval ({b[2]} vs {c[2]}; needs >= 2 per side)"
    return b[0], c[0], d


def _divergence(rows: Rows, base: Rows, n: int, rng) -> tuple[float, np.ndarray] | None:
    pair = compare_outputs("cell", rows, "baseline", base)
    if not pair.n:
        return None
    diverged = np.asarray([p.position is not None for p in pair.prompts], dtype=np.float64)
    return float(diverged.mean()), resample_weights(len(diverged), n, rng) @ diverged / len(diverged)


def study_figures(
    base_rows: Rows,
    base_ref: Rows,
    cand_rows: Rows,
    cand_ref: Rows,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, tuple[float, float, tuple[float, float], np.ndarray]]:
    """``{metric: (base value, cand value, CI of cand - base, its replicates)}`` for
    divergence_share (speed-up: :func:`speedup_delta`).

    ``*_rows`` are a cell's request rows on each side, ``*_ref`` the rows of that side's baseline
    cell; a metric that cannot be computed on both sides is left out.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, fn in (("divergence_share", _divergence),):
        b, c = fn(base_rows, base_ref, n_resamples, rng), fn(cand_rows, cand_ref, n_resamples, rng)
        if b is None or c is None:
            continue
        out[name] = (b[0], c[0], percentile_interval(c[1] - b[1], confidence), c[1] - b[1])
    return out

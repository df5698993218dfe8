"""Compare metrics measured against a run's own baseline cell: speed-up and divergence share.

Both sides of a comparison carry their own no-speculation baseline cell; each speculative cell's
figure is taken against the baseline of its own run, then the two runs' figures are compared:

- ``speedup``: output tok/s of the cell over its run's baseline cell (Σ output tokens / Σ e2e over
  requests, see :mod:`specbench.analysis.speedup`), higher is better.
- ``divergence_share``: share of prompts whose greedy output differs from the run's baseline cell
  (see :mod:`specbench.analysis.divergence`), lower is better: speculation should not change text.

CI of the change: each side's figure is bootstrapped over its requests (paired with its own
baseline's by prompt), the two sides independently, and the percentile interval of the difference
of the replicates is taken; the replicates also give the check's p-value (run-level Holm).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specbench.analysis.bootstrap import percentile_interval, resample_weights
from specbench.analysis.divergence import compare_outputs
from specbench.analysis.speedup import resampled_speedups


def _speedup(rows: list[dict[str, Any]], base: list[dict[str, Any]], n: int, rng) -> tuple[float, np.ndarray] | None:
    try:
        point, samples, _ = resampled_speedups(rows, base, n, rng)
    except ValueError:
        return None
    return point["output_tok_per_s"], samples["output_tok_per_s"]


def _divergence(rows: list[dict[str, Any]], base: list[dict[str, Any]], n: int, rng) -> tuple[float, np.ndarray] | None:
    pair = compare_outputs("cell", rows, "baseline", base)
    if not pair.n:
        return None
    diverged = np.asarray([p.position is not None for p in pair.prompts], dtype=np.float64)
    return float(diverged.mean()), resample_weights(len(diverged), n, rng) @ diverged / len(diverged)


def study_figures(base_rows: list[dict[str, Any]], base_ref: list[dict[str, Any]], cand_rows: list[dict[str, Any]],
                  cand_ref: list[dict[str, Any]], *, n_resamples: int = 2000, seed: int = 0,
                  confidence: float = 0.95) -> dict[str, tuple[float, float, tuple[float, float], np.ndarray]]:
    """``{metric: (base value, cand value, CI of cand - base, its replicates)}`` for speedup and
    divergence_share.

    ``*_rows`` are a cell's request rows on each side, ``*_ref`` the rows of that side's baseline
    cell; a metric that cannot be computed on both sides is left out.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, fn in (("speedup", _speedup), ("divergence_share", _divergence)):
        b, c = fn(base_rows, base_ref, n_resamples, rng), fn(cand_rows, cand_ref, n_resamples, rng)
        if b is None or c is None:
            continue
        out[name] = (b[0], c[0], percentile_interval(c[1] - b[1], confidence), c[1] - b[1])
    return out

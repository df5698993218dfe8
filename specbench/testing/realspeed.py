"""A/A draws of the speed-up gate from the committed default study's real requests (test support;
benchmarks/gate_error_rates.py uses it too).

Population: each speculative cell of results/baselines/cpu-default with its run's baseline cell
serving the same target; prompt i is the pair (spec request i, baseline request i), as the load
sent it to both. One A/A side draws ``n`` prompts with replacement (each drawn copy its own request
id, so a side's spec and baseline requests stay paired); the two sides draw independently, so the
true speed-up is the same on both and every difference is sampling noise between requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from specbench.compare.within_run import speedup_delta
from specbench.testing import BASELINES

BASELINE = BASELINES / "cpu-default"


def speedup_population(run: Path = BASELINE) -> dict[str, tuple[list[dict], list[dict]]]:
    """``{spec cell: (its requests, the requests of its run's baseline cell of the same MLA)}``."""

    def rows(cell: str) -> list[dict]:
        return [json.loads(line) for line in (run / cell / "requests.jsonl").read_text().splitlines()]

    out = {}
    for mla in ("on", "off"):
        base = rows(f"baseline__mla-{mla}__r0")
        for norm in ("on", "logits-only", "off"):
            spec = rows(f"mla-{mla}__output_norm-{norm}__r0")
            assert [r["prompt_id"] for r in spec] == [r["prompt_id"] for r in base]  # pairs by position
            out[f"mla-{mla}__output_norm-{norm}"] = (spec, base)
    return out


def _side(spec: list[dict], base: list[dict], idx: np.ndarray) -> tuple[list[dict], list[dict]]:
    return [dict(spec[i], id=j) for j, i in enumerate(idx)], [dict(base[i], id=j) for j, i in enumerate(idx)]


def speedup_aa(
    pop: dict[str, tuple[list[dict], list[dict]]], n: int, trials: int, rng: np.random.Generator
) -> tuple[float, float, float]:
    """(one-sided false-alarm rate on the harm side: CI of the change entirely below 0, the same
    on the other side, share of checks without an interval) over ``trials`` x cells A/A checks."""
    harm = other = none = total = 0
    for _ in range(trials):
        for spec, base in pop.values():
            b = _side(spec, base, rng.integers(0, len(spec), n))
            c = _side(spec, base, rng.integers(0, len(spec), n))
            res = speedup_delta(b[0], b[1], c[0], c[1])
            assert res is not None, "a resampled side of a committed cell always has a speed-up"
            d = res[2]
            total += 1
            if d.ci is None:
                none += 1
                continue
            lo, hi = d.ci
            harm += hi < 0
            other += lo > 0
    return harm / total, other / total, none / total

"""Requests a precision-driven load needs per cell of the default study, by resampling.

Each speculative cell of a committed default-study run (tests/load/data/default_study_request_units.json:
20 requests per cell, per-request counts) is taken as the population of requests; a study draws
requests from it with replacement and runs the real stop rule (specbench.load.precision.run_until:
jackknife-t half-width of AL, batches of 10 after 20: the config's floor, MIN_REQUESTS_FLOOR, at which
benchmarks/precision_coverage.py measures the final CI's coverage). Printed per target: each cell's median
(10th-90th percentile) requests to stop, and the total against a fixed-N study that gives every
cell the same N, chosen so the hardest cell reaches the target 9 times in 10 (its 90th percentile).

    python benchmarks/precision_savings.py [--studies 200] [--targets 0.1 0.05]

An approximation: the 20 measured requests stand for the prompt population (the built-in set has
109 prompts; at temperature 0 requests beyond that repeat prompts and add no information).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from specbench.analysis.stop_rule import MIN_REQUESTS_FLOOR
from specbench.load.precision import Batch, run_until
from specbench.records.counts import Counts

DATA = Path(__file__).resolve().parents[1] / "tests" / "load" / "data" / "default_study_request_units.json"


def stops(rows: list[list[int]], target: float, studies: int, seed: int = 0, cap: int = 2000) -> np.ndarray:
    pool = [Counts(r[0], r[1], r[2], list(r[3:]), 3) for r in rows]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(studies):

        def send(start: int, n: int) -> Batch:
            return Batch([{}] * n, [(f"r{start + i}", pool[j]) for i, j in enumerate(rng.integers(0, len(pool), n))])

        _, o = run_until(
            send, {"acceptance_length": target}, max_requests=cap, batch=10, min_requests=MIN_REQUESTS_FLOOR
        )
        out.append(o.requests_sent)
    return np.asarray(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--targets", type=float, nargs="+", default=[0.1, 0.05])
    args = ap.parse_args()
    cells = json.loads(DATA.read_text())["cells"]
    for target in args.targets:
        print(f"AL +- {target} (jackknife-t, 95%), {args.studies} resampled studies per cell:")
        per = {c: stops(rows, target, args.studies) for c, rows in cells.items()}
        for c, n in per.items():
            p10, p90 = np.percentile(n, [10, 90])
            print(f"  {c:32s} median {np.median(n):5.0f}  (p10 {p10:4.0f}, p90 {p90:4.0f})")
        fixed = max(np.percentile(n, 90) for n in per.values())
        adaptive = sum(np.median(n) for n in per.values())
        print(
            f"  total: precision-driven {adaptive:.0f} (medians) vs fixed N = {fixed:.0f} per cell x {len(per)} = "
            f"{fixed * len(per):.0f}: {1 - adaptive / (fixed * len(per)):.0%} fewer requests"
        )


if __name__ == "__main__":
    main()

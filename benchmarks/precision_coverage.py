"""Coverage of a precision-driven load's final CI under optional stopping, on committed requests.

Each speculative cell of the committed default study (results/baselines/cpu-default, MLA on: norm
on, logits-only, off; 20 requests each, per-request counts) is a population: a simulated study
draws requests from it with replacement and runs the real loop (specbench.load.precision.run_until,
batch 1: a look after every request, the most optional stopping the config allows) until the AL
half-width reaches the target; the final jackknife-t 95% CI is checked against the population's
pooled AL. Reported per cell and ``min_requests``: the worst coverage over the targets (and at
which), with the mean requests sent there, and the fixed-N coverage at the same N.

    python benchmarks/precision_coverage.py [--studies 1000] [--mins 2 3 5 10 15 20] [--cells ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from specbench.analysis.intervals import cell_intervals
from specbench.load.precision import Batch, run_until
from specbench.records.counts import Counts

RUN = Path(__file__).resolve().parents[1] / "results" / "baselines" / "cpu-default"
CELLS = ("mla-on__output_norm-on__r0", "mla-on__output_norm-logits-only__r0", "mla-on__output_norm-off__r0")
KEY = "mean_acceptance_length"
TARGETS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5)


def cell_pool(cell: str, run: Path = RUN) -> list[Counts]:
    """The cell's per-request counts (requests.jsonl ``spec_decode``)."""
    rows = [json.loads(line) for line in (run / cell / "requests.jsonl").read_text().splitlines() if line.strip()]
    return [Counts.from_dict(r["spec_decode"]) for r in rows if r.get("spec_decode") and not r.get("error")]


def truth(pool: list[Counts]) -> float:
    return cell_intervals(pool).point[KEY]


def coverage(
    pool: list[Counts],
    target: float,
    min_requests: int,
    studies: int,
    seed: int = 0,
    batch: int = 1,
    max_requests: int = 400,
    **rule,
) -> tuple[float, float]:
    """(share of final CIs covering the pooled AL, mean requests sent) over ``studies`` simulated loads."""
    rng = np.random.default_rng(seed)
    al = truth(pool)
    hit = sent = 0
    for _ in range(studies):
        units: list[Counts] = []

        def send(start: int, n: int) -> Batch:
            new = [pool[j] for j in rng.integers(0, len(pool), n)]
            units.extend(new)  # noqa: B023 - used within this iteration
            return Batch([{}] * n, [(f"r{start + i}", u) for i, u in enumerate(new)])

        _, out = run_until(
            send,
            {"acceptance_length": target},
            max_requests=max_requests,
            batch=batch,
            min_requests=min_requests,
            **rule,
        )
        iv = cell_intervals(units)
        lo, hi = iv[KEY]
        hit += lo <= al <= hi
        sent += out.requests_sent
    return hit / studies, sent / studies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=1000)
    ap.add_argument("--mins", type=int, nargs="+", default=[2, 3, 5, 10, 15, 20])
    ap.add_argument("--cells", nargs="+", default=list(CELLS))
    ap.add_argument("--targets", type=float, nargs="+", default=list(TARGETS))
    args = ap.parse_args()
    for cell in args.cells:
        pool = cell_pool(cell)
        print(f"{cell}: {len(pool)} requests, pooled AL {truth(pool):.3f}", flush=True)
        for m in args.mins:
            res = {t: coverage(pool, t, m, args.studies) for t in args.targets}
            worst = min(res, key=lambda t: res[t][0])
            cells = "  ".join(f"±{t:g}: {c:.1%} @{n:.0f}" for t, (c, n) in res.items())
            print(
                f"  min_requests {m:3d}: worst {res[worst][0]:.1%} (±{worst:g}, {res[worst][1]:.0f} requests) | {cells}",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""Coverage of the per-cell acceptance interval on the committed cells' real requests.

Population: each committed cell's per-request counts (results/baselines/*/*/requests.jsonl). One
simulated cell draws n requests with replacement and computes the interval acceptance.json,
``report`` and ``compare`` print (:func:`specbench.analysis.intervals.cell_intervals`); it covers when
it holds the population's value (the ratio of its summed counts). Printed per cell x statistic x n:
coverage (target >= 93% at 95% nominal, at 3, 5 and 10 requests; 20 is shown too) and the share
of draws with no interval (the statistic undefined in the draw, e.g. alpha_2 when no request drawn
accepted a second token, or fewer than 2 requests with trials for it: inconclusive).
Monte Carlo SE at 1000 draws ~0.7 points.

    .venv/bin/python benchmarks/ci_coverage.py                 # ~1 minute on 2 cores
    .venv/bin/python benchmarks/ci_coverage.py --draws 400 --sizes 3 5 --only norm
"""

from __future__ import annotations

import argparse

import numpy as np

from specbench.testing.realcells import coverage, populations

TARGET = 0.93
TARGET_SIZES = (3, 5, 10)  # the sizes; others are printed for information


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[3, 5, 10, 20])
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--only", default="", help="cells whose name contains this")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    worst = {True: (2.0, ""), False: (2.0, "")}  # in the target sizes, outside them
    print(
        f"per-cell 95% interval, {args.draws} draws per cell and size, seed {args.seed}; "
        "cov = coverage, none = share without an interval"
    )
    for name, units in populations().items():
        if args.only not in name:
            continue
        for n in args.sizes:
            cov = coverage(units, n, args.draws, rng)
            cells = " ".join(
                f"{key}={c:.3f}" + (f"(none {nan:.2f})" if nan else "") for key, (c, nan, _) in cov.items()
            )
            print(f"{name} n={n}: {cells}")
            for key, (c, _, given) in cov.items():
                if given and c < worst[n in TARGET_SIZES][0]:
                    worst[n in TARGET_SIZES] = (c, f"{name} {key} n={n}")
    low, where = worst[True]
    print(
        f"lowest coverage at n in {TARGET_SIZES}: {low:.3f} ({where}); target >= {TARGET}: "
        f"{'met' if low >= TARGET else 'NOT met'}"
    )
    if worst[False][1]:
        print(f"lowest coverage at other sizes: {worst[False][0]:.3f} ({worst[False][1]})")
    return 0 if low >= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())

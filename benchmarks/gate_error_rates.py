"""The regression gate's error rates, measured in one run against issue 29's targets.

Every figure comes from the current code under simulations whose populations are the committed
runs' real requests (or, for power, a simulation with known truth):

1. Run-level A/A: the share of A/A compares of the whole default study (6 speculative cells,
   default gates + ``acceptance_length:0``: 30 checks) that exit 1, at 3, 5, 10, 20 prompts per
   cell (specbench/testing/realaa.py: the same prompts on both sides, fresh draws from each prompt's
   recorded accepted-length distribution). Target <= 5%.
2. Power at the printed MDC: detection rate when the true drop equals the median MDC the gate
   prints (``mdc_power`` in specbench/testing/simulate.py), at 20 prompts. Target >= 80%. Also printed,
   without a target: the same at 10 and 5 prompts.
3. Coverage of the per-cell 95% interval for AL, DAR, every p_i and alpha_i over 3, 5, 10
   requests drawn from every committed cell (specbench/testing/realcells.py). Target >= 93%.
4. Speed-up gate A/A: one-sided false alarms of its 95% interval at 2-20 requests per cell drawn
   from the default study's cells and their baseline cells (specbench/testing/realspeed.py). Target
   <= 2.5% + 1 point.
5. Coverage of compare's paired change interval between two different cells of the default study
   (true change = the difference of their populations' statistics), 3, 5, 10 prompts. Target >= 93%.

6. A speed-up's rerun range (its interval's SE x sqrt 2, speedup.csv) contains the next run's
   estimate of the same cell, over real reruns of the default study with ``load.interleave``
   (results/reruns/default-interleaved-*; both orders of every pair; benchmarks/speedup_reruns.py
   prints each pair). Target >= 90%. No seed: real runs.

0. The gate's boundary rates (issue 54), on candidates with a known true harm put into the real
   per-prompt outcomes of results/baselines/cpu-gate at the CI recipe's size (176 prompts a cell,
   paired; gates acceptance_length:-5% and per_position[*]:-5pp; specbench/testing/realaa.py
   ``harm``): P(exit 0 | harm T) <= 5%, P(exit 1 | no harm) <= 5%, P(exit 0 | no harm) >= 80%,
   P(exit 1 | harm 2T) >= 80%; harms: AL down T in the norm-on cells, p_0 down T (5pp) in every
   cell, AL down T carried by 20% of the norm-on cells' prompts.

Each rate is printed with its Monte Carlo standard error.

    .venv/bin/python benchmarks/gate_error_rates.py              # ~4 minutes on 2 cores
    .venv/bin/python benchmarks/gate_error_rates.py --trials 100 # quicker, noisier
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from pathlib import Path

import numpy as np

from specbench.cli.exits import compare_exit
from specbench.compare import DEFAULT_GATES, compare_sides, parse_gate
from specbench.testing.realaa import aa_sides, population
from specbench.testing.realcells import coverage, paired_delta_coverage, populations
from specbench.testing.realspeed import speedup_aa, speedup_population
from specbench.testing.simulate import mdc_power

ROOT = Path(__file__).resolve().parents[1]


def mc(rate: float, trials: int) -> str:
    """A rate with its Monte Carlo standard error."""
    return f"{100 * rate:.1f}% ± {100 * math.sqrt(max(rate * (1 - rate), 1 / trials) / trials):.1f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def boundaries(trials: int, seed: int) -> bool:
    from specbench.testing import BASELINES
    from specbench.testing.realaa import boundary_sides, harm

    gates = [parse_gate("acceptance_length:-5%"), parse_gate("per_position[*]:-5pp")]
    pop = population(BASELINES / "cpu-gate")
    print(f"0. boundary rates, cpu-gate at 176 prompts a cell, {trials} compares each, seed {seed}")
    ok = True
    scenarios = [("no harm", "al", 0.0)] + [
        (f"{name} {amount:g}x T", shape, amount * 0.05)
        for amount in (1, 2)
        for name, shape in (("AL down", "al"), ("p_0 down", "p0"), ("AL down in 20% of prompts", "al-20%"))
    ]
    for i, (name, shape, amount) in enumerate(scenarios):
        rng = np.random.default_rng(seed + 100 + i)
        cand = (
            {cid: harm(c, shape, amount) for cid, c in pop.items() if shape == "p0" or c["axes"]["output_norm"] == "on"}
            if amount
            else {}
        )
        codes = [
            compare_exit(compare_sides(*boundary_sides(pop, cand, 176, rng), gates, n_resamples=200))
            for _ in range(trials)
        ]
        r0, r1 = codes.count(0) / trials, codes.count(1) / trials
        if not amount:
            good = r1 <= 0.05 and r0 >= 0.8
            want = "exit 1 <= 5% and exit 0 >= 80%"
        elif amount == 0.05:
            good, want = r0 <= 0.05, "exit 0 <= 5%"
        else:
            good, want = r1 >= 0.8, "exit 1 >= 80%"
        ok &= good
        print(
            f"   {name:<34} exit 0 {mc(r0, trials)}, exit 1 {mc(r1, trials)}, exit 3 "
            f"{100 * codes.count(3) / trials:.1f}%   target {want}: {verdict(good)}"
        )
    return ok


def run_level(trials: int, seed: int) -> bool:
    gates = [parse_gate(g) for g in (*DEFAULT_GATES, "acceptance_length:0")]
    pop = population()
    ok = True
    print(
        f"1. run-level A/A, whole default study ({len(pop)} cells x {len(gates)} gate lines), {trials} compares "
        f"per size, seed {seed}"
    )
    for n in (3, 5, 10, 20):
        rng = np.random.default_rng(seed + n)
        codes = [compare_exit(compare_sides(*aa_sides(pop, n, rng), gates)) for _ in range(trials)]
        rate = codes.count(1) / trials
        ok &= rate <= 0.05
        print(
            f"   {n:>2} prompts per cell: exit 1 in {mc(rate, trials)}; exit 3 (inconclusive) in "
            f"{100 * codes.count(3) / trials:.1f}%   target <= 5%: {verdict(rate <= 0.05)}"
        )
    return ok


def power(trials: int, seed: int) -> bool:
    mdc, rates, _ = mdc_power(150, trials, np.random.default_rng(seed))
    ok = rates["mdc"] >= 0.80
    print(
        f"2. power at the printed MDC (per_position[*]:0, 20 prompts x 40 drafts, {trials} compares, seed {seed}): "
        f"median MDC {mdc:.4f}; detected {mc(rates['mdc'], trials)}   target >= 80%: {verdict(ok)}"
    )
    print(f"   (tolerance + CI half-width, printed before: detected {mc(rates['tolerance + half-width'], trials)})")
    for prompts in (10, 5):  # no target: with few prompts a visible harm changes the spread (docs/methods.md)
        mdc, rates, _ = mdc_power(150, trials, np.random.default_rng(seed), prompts)
        print(f"   at {prompts} prompts: median MDC {mdc:.4f}; detected {mc(rates['mdc'], trials)}")
    return ok


def cell_coverage(draws: int, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    pops = populations()
    print(f"3. per-cell 95% interval, {len(pops)} committed cells x every statistic, {draws} draws each, seed {seed}")
    ok = True
    for n in (3, 5, 10):
        worst, where, none, none_where = 2.0, "", 0.0, ""
        for name, units in pops.items():
            for key, (c, nan, given) in coverage(units, n, draws, rng).items():
                if nan > none:
                    none, none_where = nan, f"{name} {key}"
                if given and c < worst:
                    worst, where = c, f"{name} {key}"
        ok &= worst >= 0.93
        print(
            f"   {n:>2} requests: lowest coverage {100 * worst:.1f}% ({where})   target >= 93%: "
            f"{verdict(worst >= 0.93)}"
        )
        if none:
            print(
                f"      no interval (statistic undefined in the draw: inconclusive) in up to {100 * none:.0f}% of "
                f"draws ({none_where})"
            )
    return ok


def delta_coverage(draws: int, seed: int) -> bool:
    pops = {name.split("/")[1]: u for name, u in populations().items() if name.startswith("cpu-default/")}
    rng = np.random.default_rng(seed)
    print(
        f"5. compare's paired change interval between two different default-study cells (true change known), "
        f"{len(pops) * (len(pops) - 1)} ordered cell pairs x every statistic, {draws} draws each, seed {seed}"
    )
    ok = True
    for n in (3, 5, 10):
        cases = [
            (cov, f"{a} -> {b} {key}")
            for a, b in itertools.permutations(sorted(pops), 2)
            for key, (cov, given) in paired_delta_coverage(pops[a], pops[b], n, draws, rng).items()
            if given >= draws // 4
        ]
        below = [c for c in cases if c[0] < 0.93]
        worst = min(cases)
        ok &= not below
        print(
            f"   {n:>2} prompts: {len(below)} of {len(cases)} cases below 93%; lowest {100 * worst[0]:.1f}% "
            f"({worst[1]})   target >= 93%: {verdict(not below)}"
        )
    return ok


def speedup(trials: int, seed: int) -> bool:
    pop = speedup_population()
    ok = True
    print(
        f"4. speed-up gate A/A ({len(pop)} cells, {trials} trials each per size, seed {seed}), one-sided, nominal 2.5%"
    )
    for n in (1, 2, 3, 5, 10, 20):
        harm, other, none = speedup_aa(pop, n, trials, np.random.default_rng(seed + n))
        total = trials * len(pop)
        if n == 1:
            print(f"    1 request: no interval in {100 * none:.0f}% (inconclusive)")
            continue
        good = harm <= 0.035 and other <= 0.035
        ok &= good
        print(
            f"   {n:>2} requests: CI below 0 in {mc(harm, total)}, above 0 in {mc(other, total)}   "
            f"target <= 3.5%: {verdict(good)}"
        )
    return ok


def rerun_coverage() -> bool:
    """6. Real reruns (no simulation): does a speed-up's shown interval contain the next run's estimate?"""
    from speedup_reruns import INTERLEAVED, committed, coverage  # benchmarks/ is this script's directory

    from specbench.analysis.speedup import INTERLEAVED_RERUN_SD, RERUN_SD

    runs = committed(INTERLEAVED)
    if not all(r.is_dir() for group in runs.values() for r in group):
        print("6. speed-up across real reruns: the committed reruns (results/reruns/default-interleaved-*) are missing")
        return False
    il = coverage(runs, True, INTERLEAVED_RERUN_SD, out=None)
    apart = coverage(runs, False, RERUN_SD, out=None)
    if not il["checks"]:
        print("6. speed-up across real reruns: the committed reruns are missing")
        return False
    good = il["rerun_range"] >= 0.9 * il["checks"]
    print(
        f"6. speed-up across {len(runs['0'])} real reruns of the default study (load.interleave 4; "
        f"benchmarks/speedup_reruns.py): the rerun range contains the next run's estimate in "
        f"{il['rerun_range']}/{il['checks']} ({il['rerun_range'] / il['checks']:.0%})   target >= 90%: "
        f"{verdict(good)}; the 95% CI in {il['shown']}/{il['checks']} ({il['shown'] / il['checks']:.0%})"
    )
    print(
        f"    the same runs measured apart (each cell against its baseline cell's own load, as without "
        f"interleave): {apart['shown']}/{apart['checks']} ({apart['shown'] / apart['checks']:.0%}) with RERUN_SD "
        f"{RERUN_SD:g}, {apart['within']}/{apart['checks']} within-run only"
    )
    return good


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=400, help="compares / draws per size (speed-up: per cell)")
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--only", choices=["boundaries"], help="run one section only")
    args = ap.parse_args(argv)
    t0 = time.time()
    ap_only = args.only
    if ap_only == "boundaries":
        ok = boundaries(args.trials, args.seed)
        print(f"{'met' if ok else 'NOT met'} ({time.time() - t0:.0f} s)")
        return 0 if ok else 1
    results = [
        boundaries(args.trials, args.seed),
        speedup(args.trials, args.seed),
        cell_coverage(args.trials, args.seed),
        delta_coverage(args.trials, args.seed),
        power(args.trials, args.seed),
        run_level(args.trials, args.seed),
        rerun_coverage(),
    ]
    print(f"all targets {'met' if all(results) else 'NOT met'} ({time.time() - t0:.0f} s)")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

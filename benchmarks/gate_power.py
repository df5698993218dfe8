"""Power and false-alarm rate of specbench's compare gates, by simulation with known truth.

Each trial simulates a baseline and a candidate side (per-draft Bernoulli chains with known p_i,
grouped into request units with per-request spread, specbench/testing/simulate.py) and runs
the real comparison (:func:`specbench.compare.cellwise.compare_cell`: jackknife t interval over
request units, then the gate rule). "detect" = the gate fails when the candidate's p_0 is truly
``--drop`` lower; "false alarm" = the gate fails when both sides have the same truth; "size" = the
gate fails when the true drop equals the gate's own tolerance (the boundary of what it allows: the
rate there is the gate's size, meant to be <= 2.5% one-sided at 95%). Every rate is printed with
its Monte Carlo standard error sqrt(r (1 - r) / trials).

    .venv/bin/python benchmarks/gate_power.py            # ~1 minute on 2 cores
    .venv/bin/python benchmarks/gate_power.py --trials 400 --drafts 5000 10000 20000 40000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from specbench.compare.cellwise import compare_cell
from specbench.compare.gates import parse_gate
from specbench.compare.sides import SideCell
from specbench.testing.simulate import simulate_units

P = [0.77, 0.55, 0.35]  # the tiny fixture's measured p_0 is ~0.77


def side(units) -> SideCell:
    return SideCell(key=(), name="sim", axes={}, cell_ids=["sim"], units=units, unit_kind="request")


def fail_rates(gates, drafts: int, drop: float, args, rng) -> dict[str, float]:
    """Fraction of trials in which each gate fails; all gates judge the same simulated trials."""
    n_units = max(2, drafts // args.drafts_per_request)
    cand_p = [P[0] - drop] + P[1:]
    fails = {g.expr: 0 for g in gates}
    for _ in range(args.trials):
        base = simulate_units(P, n_units, args.drafts_per_request, rng, spread=args.spread)
        cand = simulate_units(cand_p, n_units, args.drafts_per_request, rng, spread=args.spread)
        cell = compare_cell(side(base), side(cand), gates, n_resamples=args.resamples, seed=int(rng.integers(2**31)))
        for g in cell.gates:
            fails[g.gate] += g.status == "fail"
    return {k: v / args.trials for k, v in fails.items()}


def mc(rate: float, trials: int) -> str:
    """A rate with its Monte Carlo standard error."""
    return f"{rate:.3f}±{math.sqrt(max(rate * (1 - rate), 1 / trials) / trials):.3f}"


def sizes(gates, drafts: int, args, rng) -> dict[str, float]:
    """Fail rate of each tolerance gate when the true drop equals its tolerance (its size)."""
    out = {}
    for g in gates:
        tol = g.tolerance(P[0])
        if tol > 0:
            out[g.expr] = fail_rates([g], drafts, tol, args, rng)[g.expr]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--drafts", type=int, nargs="+", default=[5000, 10000, 15000, 20000, 25000], help="drafts per side to try"
    )
    ap.add_argument("--gates", nargs="+", default=["per_position[0]:0", "per_position[0]:-1pp", "per_position[0]:-2pp"])
    ap.add_argument("--drop", type=float, default=0.02, help="true drop of p_0 in the candidate (fraction)")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--drafts-per-request", type=int, default=25)
    ap.add_argument("--spread", type=float, default=0.3, help="per-request sd of the rates on the logit scale")
    ap.add_argument("--resamples", type=int, default=500, help="bootstrap resamples (latency rows only)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    print(
        f"p = {P}, drop of p_0 = {args.drop * 100:g} points, {args.drafts_per_request} drafts/request, "
        f"spread {args.spread}, {args.trials} trials per entry, {args.resamples} bootstrap resamples"
    )
    se = math.sqrt(0.25 / args.trials)
    print(f"Monte Carlo error of a rate: <= +/-{1.96 * se:.3f} (95%); each rate below is rate±SE\n")
    header = f"{'gate':<24}{'drafts/side':>12}{'requests':>10}{'detect':>14}{'false alarm':>14}{'size (drop=tol)':>17}"
    gates = [parse_gate(g) for g in args.gates]
    powered: dict[str, int | None] = {g.expr: None for g in gates}
    rows = []
    for drafts in args.drafts:
        det = fail_rates(gates, drafts, args.drop, args, rng)
        fa = fail_rates(gates, drafts, 0.0, args, rng)
        size = sizes(gates, drafts, args, rng)
        for g in gates:
            if det[g.expr] >= 0.95 and powered[g.expr] is None:
                powered[g.expr] = drafts
            rows.append((g.expr, drafts, det[g.expr], fa[g.expr], size.get(g.expr)))
        print(f"  ... {drafts} drafts done ({time.time() - t0:.0f} s)", flush=True)
    print(header + "\n" + "-" * len(header))
    t = args.trials
    for expr, drafts, det, fa, size in sorted(rows, key=lambda r: (args.gates.index(r[0]), r[1])):
        sz = "—" if size is None else mc(size, t)
        print(f"{expr:<24}{drafts:>12}{drafts // args.drafts_per_request:>10}{mc(det, t):>14}{mc(fa, t):>14}{sz:>17}")
    print()
    for expr, n in powered.items():
        where = f"{n} drafts per side" if n else f"more than {max(args.drafts)} drafts per side (not reached)"
        print(f"95% power for a {args.drop * 100:g}-point drop at position 0 with {expr}: {where}")
    # Unclustered normal theory for the significance-only gate, as an independent reference.
    z = 1.959964 + 1.644854
    var = P[0] * (1 - P[0]) + (P[0] - args.drop) * (1 - P[0] + args.drop)
    print(
        f"reference (independent drafts, normal approx., tolerance 0): {math.ceil(var * (z / args.drop) ** 2)} "
        "drafts per side"
    )
    print(f"elapsed {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()

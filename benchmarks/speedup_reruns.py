"""Speed-up across real reruns: does the interval specbench shows cover the next run's estimate?

Input: groups of run directories that ran the same config on the same machine at different times
(by default the committed ones: the 6-cell CI study twice, 30 min apart, and the k-sweep,
seed-questions and head-variants studies as run on 2026-12-03 and again on 2026-12-06). For every speculative cell that two runs of a group share, and
every ordered pair of those runs (A before B or after it), the question is whether A's interval
contains B's point estimate (output tok/s speed-up over the cell's own baseline, the figure the
screen, report and gate show):

- within-run: A's t interval on the log, jackknifed over requests (``rerun_sd=0``);
- widened: the same with the between-run SD ``s`` added (``se^2 + s^2``), ``s`` estimated from
  the *other* groups' pairs (leave one group out, so no pair grades an interval made from itself)
  and, printed beside it, the value estimated from all pairs, which is what
  specbench.analysis.speedup.RERUN_SD should be set to.

s^2 from a pair: ``d = log A - log B`` has variance ``2 s^2 + se_A^2 + se_B^2``, so
``s^2 = mean(d^2 - se_A^2 - se_B^2) / 2`` over the pairs (0 if negative).

    .venv/bin/python benchmarks/speedup_reruns.py
    .venv/bin/python benchmarks/speedup_reruns.py RUN RUN [RUN ...] [--group RUN RUN ...]  # your own reruns
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

from specbench.analysis.intervals import t_quantile
from specbench.analysis.speedup import INTERLEAVED_RERUN_SD, RERUN_SD
from specbench.report.baseline_pairs import run_speedups

ROOT = Path(__file__).resolve().parents[1]


COMMITTED = [
    ("reruns/ci-gate-6cells-a", "reruns/ci-gate-6cells-b"),
    ("reruns/k-sweep-2026-12-03", "baselines/cpu-k-sweep"),
    ("reruns/seed-questions-2026-12-03", "baselines/cpu-seed-questions"),
    ("reruns/head-variants-2026-12-03", "baselines/cpu-head-variants"),
]


# The default study with load.interleave 4, run 8 times back to back on one 2-core VM, 2026-12-06
# 20:09-21:14 UTC: runs 1-2 beside the full test suite (and overlapping each other for 1.5 min), 3-4
# beside shorter test runs, 5-8 on a quiet machine. Runs 1-3 were written before requests carried
# their block; it was added to their files as id // 4, what the driver writes.
INTERLEAVED = [tuple(f"reruns/default-interleaved-{i}" for i in range(1, 9))]


def _pairs(group: list[Path], interleaved: bool = True) -> list[tuple[str, float, float, float, float, float]]:
    """(pair and cell, log A, se A, log B, se B, t) for every cell two runs share, both orders of each
    pair; the SEs read back off the within-run intervals (half-width / t on the log). ``interleaved``
    False: a cell run with load.interleave measured against its baseline cell's own load instead."""
    figures = {}
    for run in group:
        for s in run_speedups(run, interleaved=interleaved).speedups:
            lo, hi = s.within["output_tok_per_s"]
            p = s.point["output_tok_per_s"]
            if p > 0 and math.isfinite(lo) and lo > 0:
                t = t_quantile(0.95, s.df)  # each run's own df: its SE read back off its own interval
                figures[(run, s.cell)] = (math.log(p), (math.log(hi) - math.log(lo)) / 2 / t, t)
    out = []
    for a, b in itertools.permutations(group, 2):
        for (run, cell), (la, sa, t) in figures.items():
            if run == a and (b, cell) in figures:
                lb, sb, _ = figures[(b, cell)]
                out.append((f"{a.name} -> {b.name}: {cell}", la, sa, lb, sb, t))
    return out


def _sd(pairs) -> float:
    if not pairs:
        return 0.0
    v = sum((la - lb) ** 2 - sa**2 - sb**2 for _, la, sa, lb, sb, _ in pairs) / len(pairs) / 2
    return math.sqrt(max(v, 0.0))


def coverage(groups: dict[str, list[Path]], interleaved: bool, shown_sd: float, out=print) -> dict[str, int]:
    """Coverage counts over every ordered pair of runs within each group: ``checks``, and how many
    of them the within-run interval, the interval widened by the held-out SD, and the interval as
    specbench shows it (widened by ``shown_sd``) contain. ``out`` prints the lines (None: silent)."""
    say = out or (lambda *_: None)
    pairs = {g: _pairs(runs, interleaved) for g, runs in groups.items()}
    every = [p for ps in pairs.values() for p in ps]
    counts = {"checks": len(every), "within": 0, "held_out": 0, "shown": 0, "rerun_range": 0}
    widths = sorted(math.exp(2 * t * math.hypot(sa, shown_sd)) for _, _, sa, _, _, t in every)
    if not every:
        say("no speculative cell shared by two runs of a group")
        return counts
    say(f"{len(groups)} group(s) of reruns, {len(every) // 2} cell pair(s), both orders: {len(every)} checks")
    say(f"between-run SD of the log speed-up, all pairs: {_sd(every):.3f} (specbench uses {shown_sd:g})")
    for g, ps in pairs.items():
        s = _sd([p for h, q in pairs.items() if h != g for p in q]) if len(pairs) > 1 else _sd(ps)
        say(f"\n{', '.join(r.name for r in groups[g])}: held-out SD {s:.3f}")
        for name, la, sa, lb, _, t in ps:
            w = abs(la - lb) <= t * sa
            v = abs(la - lb) <= t * math.hypot(sa, s)
            d = abs(la - lb) <= t * math.hypot(sa, shown_sd)
            r = abs(la - lb) <= t * math.sqrt(2) * math.hypot(sa, shown_sd)  # Speedup.rerun_range
            counts["within"] += w
            counts["held_out"] += v
            counts["shown"] += d
            counts["rerun_range"] += r
            say(
                f"  {name}: x{math.exp(lb - la):.3f}  within {'in ' if w else 'OUT'}  widened {'in ' if v else 'OUT'}  "
                f"shown {'in ' if d else 'OUT'}  rerun range {'in ' if r else 'OUT'}"
            )
    n = len(every)
    say(
        f"\ncoverage of the next run's estimate (target >= 90%): within-run {counts['within']}/{n} "
        f"({counts['within'] / n:.0%}), widened by the held-out SD {counts['held_out']}/{n} "
        f"({counts['held_out'] / n:.0%}), the CI as specbench shows it (SD {shown_sd:g}) {counts['shown']}/{n} "
        f"({counts['shown'] / n:.0%}), its rerun range (x sqrt 2) {counts['rerun_range']}/{n} "
        f"({counts['rerun_range'] / n:.0%}); the shown CI's median width: high/low = {widths[len(widths) // 2]:.2f}"
    )
    counts["median_width"] = widths[len(widths) // 2]
    return counts


def committed(names) -> dict[str, list[Path]]:
    return {str(i): [ROOT / "results" / r for r in g] for i, g in enumerate(names)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path, help="one group of reruns of one config")
    ap.add_argument("--group", nargs="+", type=Path, action="append", default=[], help="another group (repeatable)")
    args = ap.parse_args()
    given = [g for g in [args.runs, *args.group] if len(g) > 1]
    if given:
        groups = {str(i): g for i, g in enumerate(given)}
        if any(s.interleaved for runs in groups.values() for r in runs for s in run_speedups(r).speedups):
            print("== interleaved: each cell against its baseline's requests sent between its own (load.interleave)")
            coverage(groups, True, INTERLEAVED_RERUN_SD)
            print("\n== apart: the same runs, each cell against its baseline cell's own load")
        coverage(groups, False, RERUN_SD)
        return 0
    print("== interleaved (load.interleave 4): each cell against its baseline's requests sent between its own")
    coverage(committed(INTERLEAVED), True, INTERLEAVED_RERUN_SD)
    print("\n== apart, the same runs: each cell against its baseline cell's own load (as without load.interleave)")
    coverage(committed(INTERLEAVED), False, RERUN_SD)
    print("\n== apart, the earlier reruns (made without load.interleave)")
    coverage(committed(COMMITTED), False, RERUN_SD)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

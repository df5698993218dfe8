"""Run-to-run noise of latency and throughput: how far same-config reruns on one machine move.

Evidence for compare's default noise floors (specbench/compare/noise.py, docs/methods.md
"Between-run variance"). Every cell of every run given is matched with the cells of the other runs
that served the same configuration (model, method, k, MLA, head switches with their shipped
defaults filled in, baseline or not) under the same load, on the same machine (hostname and CPU
model in the manifests). For each ordered pair of such cells (baseline -> candidate) it prints
compare's own point figures (``compare_cell``: median TTFT / ITL / e2e over requests, the load's
output tok/s, the speed-up over the run's own no-speculation cell serving the same target) and
the ratio candidate / baseline, then per metric the worst harm seen: the largest ratio for a
lower-is-better metric, the smallest for a higher-is-better one. Acceptance counts are printed
too: identical counts say the two servers computed the same thing (the shift is the machine's).

A run is a directory or ``REV:PATH`` (a run committed earlier, read with ``git archive``)::

    .venv/bin/python benchmarks/noise_floor.py                 # the committed runs (~20 s)
    .venv/bin/python benchmarks/noise_floor.py results/baselines/cpu-default /tmp/rerun --write floors.yaml
    specbench compare BASE CAND --gate e2e_p50_ms:+10% --noise-floor floors.yaml

``--write`` turns the worst harm per metric of the runs given into a ``--noise-floor`` file: run the
baseline's study two or three times on the CI machine, at different times of day, and pass them all.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from itertools import permutations
from pathlib import Path

from specbench.testing.reruns import DEFAULT_RUNS, cells_of, materialize

METRICS = ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms", "output_tok_per_s", "speedup")


def main(argv: list[str] | None = None) -> int:
    from specbench.compare.cellwise import compare_cell
    from specbench.compare.registry import METRICS as REGISTRY

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", default=DEFAULT_RUNS)
    ap.add_argument(
        "--write",
        type=Path,
        metavar="FILE",
        help="write the worst harm per metric, rounded up to 10 points, as a --noise-floor file",
    )
    args = ap.parse_args(argv)
    worst: dict[str, tuple[float, str]] = {}
    seen: dict[str, list[float]] = {m: [] for m in METRICS}
    with tempfile.TemporaryDirectory() as tmp:
        cells = [c for spec in args.runs for c in cells_of(materialize(spec, Path(tmp)))]
    groups: dict[tuple, list] = {}
    for c in cells:
        groups.setdefault(c[0], []).append(c)
    print(f"{'cell (baseline run -> candidate run)':78s} " + " ".join(f"{m:>17s}" for m in METRICS) + "  AL")
    for _ident, members in groups.items():
        for (_, bc, br, bl), (_, cc, cr, cl) in permutations(members, 2):
            rows = {r.name: r for r in compare_cell(bc, cc, refs=(br, cr), n_resamples=200).rows}
            ratios = []
            for m in METRICS:
                r = rows.get(m)
                if r is None or not r.base or r.cand is None:
                    ratios.append("-")
                    continue
                ratio = r.cand / r.base
                seen[m].append(ratio)
                harm = ratio if not REGISTRY[m].higher_is_better else 1 / ratio
                if harm > worst.get(m, (0.0, ""))[0]:
                    worst[m] = (harm, f"{bl} {bc.name} -> {cl} {cc.name}")
                ratios.append(f"{r.base:7.4g}->{ratio:5.2f}x")
            al = rows.get("mean_acceptance_length")
            al_text = "-" if al is None else f"{al.base:.4f}/{al.cand:.4f}"
            print(
                f"{bl[:16]} {bc.name[:26]:26s} -> {cl[:16]} {cc.name[:16]:16s} "
                + " ".join(f"{x:>17s}" for x in ratios)
                + f"  {al_text}"
            )
    print("\nworst harm per metric over every ordered same-config, same-machine pair:")
    for m in METRICS:
        if m not in worst:
            print(f"  {m}: no pair")
            continue
        harm, where = worst[m]
        up = not REGISTRY[m].higher_is_better
        change = (harm - 1) if up else (1 / harm - 1)
        print(f"  {m}: {change * 100:+.0f}% ({len(seen[m])} ordered pairs; {where})")
    if args.write is not None:
        lines = [
            "# specbench compare --noise-floor: worst same-config rerun on one machine, rounded up to 10 points",
            f"# (benchmarks/noise_floor.py {' '.join(args.runs)})",
        ]
        for m, (harm, _) in worst.items():
            change = (harm - 1) if not REGISTRY[m].higher_is_better else (1 / harm - 1)
            step = math.ceil(abs(change) * 10 + 1e-9) * 10  # percentage points, rounded up
            lines.append(f"{m}: {'+' if change > 0 else '-'}{min(step, 99) if change < 0 else step}%")
        args.write.write_text("\n".join(lines) + "\n")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

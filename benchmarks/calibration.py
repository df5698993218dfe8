"""The calibration study's tables (docs/studies/calibration.md), regenerated from its committed runs.

Reads results/baselines/cpu-calibration (configs/calibration.yaml: vLLM's synthetic acceptance at
four rate profiles x concurrency 1, 4) and results/baselines/cpu-calibration-speedup
(configs/calibration-speedup.yaml: synthetic acceptance lengths 1.5-4.0 beside a no-speculation
baseline) and results/reruns/calibration-seeds (configs/calibration-seeds.yaml: one cell at vLLM
--seed 1-4) and prints, as Markdown, each block the page shows between ``<!-- calibration.py NAME -->``
markers: per cell the configured truth beside the estimate and its 95% CI, log == /metrics, the
coverage of the CIs against the truth, and the speed-up against the configured AL with the
break-even AL. tests/testing/test_calibration_doc.py checks the page holds exactly this.

    .venv/bin/python benchmarks/calibration.py                       # the committed runs, ~2 s
    .venv/bin/python benchmarks/calibration.py --calibration RUN --speedup RUN2
    .venv/bin/python benchmarks/calibration.py --write docs/studies/calibration.md   # the blocks in place
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specbench.testing import show_marked_blocks
from specbench.testing.calibration_tables import CALIBRATION, SEEDS, SPEEDUP, all_tables


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibration", type=Path, default=CALIBRATION, help="run directory of configs/calibration.yaml")
    ap.add_argument("--speedup", type=Path, default=SPEEDUP, help="run directory of configs/calibration-speedup.yaml")
    ap.add_argument("--seeds", type=Path, default=SEEDS, help="run directory of configs/calibration-seeds.yaml")
    ap.add_argument("--write", type=Path, help="replace the marked blocks of this page instead of printing")
    ap.add_argument("--figure", type=Path, help="also draw speed-up against AL (with break-even) to this PNG")
    args = ap.parse_args(argv)
    if args.figure and (args.speedup / "manifest.json").is_file():
        _figure(args.speedup, args.figure)
    speedup = args.speedup if (args.speedup / "manifest.json").is_file() else None
    seeds = args.seeds if (args.seeds / "manifest.json").is_file() else None
    tables = all_tables(args.calibration, speedup, seeds)
    return show_marked_blocks(tables, "calibration.py", args.write)


def _figure(run_dir: Path, out: Path) -> None:
    from specbench.render.plots.curves import save_figure
    from specbench.render.plots.speedup_al import speedup_al_figure
    from specbench.testing.calibration_tables import break_even, speedup_points

    points = speedup_points(run_dir)
    rows = [(p.concurrency or 0, p.length, p.speedup, p.low, p.high) for p in points]
    breaks = {c or 0: marks[0] for c, marks in break_even(points).items()}
    fig = speedup_al_figure(
        rows, breaks, note=f"{run_dir.name}: tiny fixture target on vLLM-CPU, k 3, load.interleave 4"
    )
    save_figure(fig, out.with_suffix(""))


if __name__ == "__main__":
    raise SystemExit(main())

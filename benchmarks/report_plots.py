"""What ``specbench report --no-plots`` saves, against ``specbench report`` on the same run in the
same session, and against a bare interpreter (``python -c pass``) as the floor.

A CI job that reads summary.md or acceptance.csv does not need the figures; writing them (PNG and
SVG of each, through matplotlib) is most of what a report costs. Each command runs ``--repeats``
times in alternating order into a fresh directory; the median wall time of each and the ratios are
printed.

    .venv/bin/python benchmarks/report_plots.py                     # ~1 minute
    .venv/bin/python benchmarks/report_plots.py --run results/baselines/cpu-seed-questions
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from alternating import medians


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--run", default="results/baselines/cpu-default")
    args = ap.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            "python -c pass": lambda r: [py, "-c", "pass"],
            "specbench report": lambda r: [py, "-m", "specbench", "report", args.run, "--out", f"{tmp}/p{r}"],
            "specbench report --no-plots": lambda r: [
                py,
                "-m",
                "specbench",
                "report",
                args.run,
                "--out",
                f"{tmp}/n{r}",
                "--no-plots",
            ],
        }
        median = medians(commands, args.repeats)
    full = median["specbench report"]
    print(f"report of {args.run}, {args.repeats} runs each, median wall time")
    print(f"{'command':<32} {'median s':>9} {'x report':>9}")
    for name, m in median.items():
        print(f"{name:<32} {m:9.3f} {m / full:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

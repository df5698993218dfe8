"""What a short CLI command costs, against its peers measured in the same run.

``specbench validate CONFIG`` (what a user or a CI step runs before a study) and ``specbench
--help``, each against a bare interpreter (``python -c pass``) and against ``python -c "import
torch"``: the import validate paid, until naming a fixture's cache entry stopped importing the
fixture builders (specbench/fixtures/versions.py). Each command runs ``--repeats`` times in
alternating order; the median wall time of each and the ratios to the peers are printed.

    .venv/bin/python benchmarks/cli_startup.py              # ~1 minute
    .venv/bin/python benchmarks/cli_startup.py --repeats 5 --config configs/seed-questions.yaml
"""

from __future__ import annotations

import argparse
import sys

from alternating import medians


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--config", default="configs/default.yaml")
    args = ap.parse_args(argv)
    py = sys.executable
    commands = {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import torch'": [py, "-c", "import torch"],
        "specbench --help": [py, "-m", "specbench", "--help"],
        f"specbench validate {args.config}": [py, "-m", "specbench", "validate", args.config],
    }
    median = medians({name: (lambda r, argv=argv: argv) for name, argv in commands.items()}, args.repeats)
    bare, torch = median["python -c pass"], median["python -c 'import torch'"]
    print(f"{'command':<48} {'median s':>9} {'x bare python':>14} {'x import torch':>15}")
    for name, m in median.items():
        print(f"{name:<48} {m:9.3f} {m / bare:14.1f} {m / torch:15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

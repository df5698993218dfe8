"""Hostile input: time and peak memory of parsing vs `grep -F -c 'metrics:'` on the same file, and
`specbench report`'s memory vs the size of the records it parses, measured in one run.

Cases (each one line of --mb MB unless said): a SpecDecoding line claiming 10^6 positions; a line
of commas; a line of "Name:" pairs; an offline-summary label followed by spaces; an Engine line
with a run of zeros; a log of 10,000 lines each over the position cap. Every parse runs in its own
process, so its peak RSS is its own (resource.getrusage); tracemalloc gives the parser's own
allocations. Then `report` on a sparse server log (parse_throughput's layout) and on a 1 MB line
with 10^5 positions: peak RSS above `report` on a like-for-like small log, vs the parsed records'
size. Like for like: the sparse log is compared with one block (100 windows) of the same layout,
which runs the same code (bootstrap, t quantiles, warnings, both figures, so the same lazily
imported modules); the one-record log, which runs none of that, is the baseline of the one-record
wide line only. (Against a one-record log the sparse log's figure also counted scipy.stats being
imported, ~58 MB here, whatever the log's size.)

    python benchmarks/parse_hostile.py [--mb 10] [--report-mb 50] [--report-only]

Targets (issue 13): a 10 MB hostile line in < 1 s; report in memory <= 2x its parsed records.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "(APIServer pid=7) INFO 12-02 13:26:42 [metrics.py:120] SpecDecoding metrics: "


def cases(n: int) -> dict[str, str]:
    many = ", ".join(["0.500"] * 300)
    return {
        "10^6 positions": PREFIX + "Mean acceptance length: 2.70, Accepted: 5 tokens, Drafted: 9 tokens, "
        "Per-position acceptance rate: " + "0.5, " * (n // 5) + "Avg Draft acceptance rate: 5.0%\n",
        "commas": PREFIX + "Mean acceptance length: 2.70" + "," * n + "\n",
        "name: pairs": PREFIX + "Mean acceptance length: 2.70, " + "a:" * (n // 2) + "\n",
        "summary label + spaces": "num_drafts" + " " * n + "x\n",
        "Engine + zeros": "Engine " + "0" * n + " Avg prompt throughput: 1\n",
        "10k lines over the position cap": (
            PREFIX + "Accepted: 5 tokens, Per-position acceptance rate: " + many + ", Avg Draft acceptance rate: 5.0%\n"
        )
        * max(1, n // 1600),
    }


# Timed without tracemalloc (it slows every allocation), then parsed again under it for the peak.
CHILD = """
import json, resource, sys, time, tracemalloc
from specbench.metrics.parse import parse_file
t0 = time.perf_counter(); c0 = time.process_time()
res = parse_file(sys.argv[1])
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
parse_file(sys.argv[1])
print(json.dumps({"wall": wall, "cpu": cpu, "traced_peak": tracemalloc.get_traced_memory()[1], "maxrss_kb": rss,
                  "records": len(res.records), "warnings": len(res.warnings)}))
"""

RECORDS_SIZE = """
import json, sys, tracemalloc
from specbench.metrics.parse import parse_file
tracemalloc.start()
recs = parse_file(sys.argv[1]).records
print(json.dumps({"records": len(recs), "bytes": tracemalloc.get_traced_memory()[0]}))
"""


def _run(args: list[str], env: dict) -> dict:
    out = subprocess.run(args, capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _grep(path: Path) -> tuple[float, float]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(["grep", "-F", "-c", "metrics:", str(path)], capture_output=True, check=False)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - t0, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def _report_rss(path: Path, out: Path, env: dict) -> int:
    """Peak RSS (KB) of `specbench report FILE --out DIR` in its own process."""
    code = (
        "import resource, sys\nfrom specbench.cli.main import app\n"
        'try:\n    app(["report", sys.argv[1], "--out", sys.argv[2]])\nexcept SystemExit:\n    pass\n'
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    res = subprocess.run([sys.executable, "-c", code, str(path), str(out)], capture_output=True, text=True, env=env)
    return int(res.stdout.strip().splitlines()[-1])


def _hostile(tmp: Path, n: int, mb: float, env: dict) -> None:
    print(f"hostile inputs of {mb:g} MB; target: each parsed in < 1 s")
    print(
        f"{'case':34s} {'grep':>7s} {'parse wall':>11s} {'cpu':>6s} {'x grep':>7s} {'traced peak':>12s} {'RSS':>8s}  recs warns"
    )
    for name, text in cases(n).items():
        path = tmp / "hostile.log"
        path.write_text(text)
        g_wall, g_cpu = _grep(path)
        r = _run([sys.executable, "-c", CHILD, str(path)], env)
        print(
            f"{name:34s} {g_wall:6.3f}s {r['wall']:10.3f}s {r['cpu']:5.2f}s {r['wall'] / g_wall:6.1f}x "
            f"{r['traced_peak'] / 1e6:9.1f} MB {r['maxrss_kb'] / 1024:6.0f} MB  {r['records']:4d} {r['warnings']:5d}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=10.0, help="size of each hostile line")
    ap.add_argument("--report-mb", type=float, default=50.0, help="size of the sparse log given to report")
    ap.add_argument("--report-only", action="store_true", help="measure report's memory only")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    n = int(args.mb * 1e6)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if not args.report_only:
            _hostile(tmp, n, args.mb, env)

        from parse_throughput import write_log

        print("\n`specbench report` peak RSS above a like-for-like small log, vs the parsed records (target <= 2x)")
        one = tmp / "one.log"
        one.write_text(
            PREFIX + "Mean acceptance length: 2.70, Accepted throughput: 1.00 tokens/s, Drafted throughput: "
            "2.00 tokens/s, Accepted: 5 tokens, Drafted: 9 tokens, Per-position acceptance rate: 0.500, "
            "Avg Draft acceptance rate: 55.6%\n"
        )
        block = tmp / "block.log"
        write_log(block, 1, "sparse")  # one block: 100 windows of the sparse layout
        sparse = tmp / "sparse.log"
        write_log(sparse, int(args.report_mb * 1e6), "sparse")
        wide = tmp / "wide.log"
        wide.write_text(
            PREFIX + "Mean acceptance length: 2.70, Accepted: 5 tokens, Drafted: 9 tokens, "
            "Per-position acceptance rate: " + "0.50, " * 100_000 + "Avg Draft acceptance rate: 5.0%\n"
        )
        for label, path, small, small_name in (
            (f"sparse server log, {args.report_mb:g} MB", sparse, block, "100-window log"),
            ("1 MB line, 10^5 positions", wide, one, "one-record log"),
        ):
            base = _report_rss(small, tmp / "rep0", env)
            size = _run([sys.executable, "-c", RECORDS_SIZE, str(path)], env)
            rss = _report_rss(path, tmp / "rep", env)
            above = (rss - base) * 1024
            ratio = f" = {above / size['bytes']:.2f}x the records" if size["bytes"] > 1e6 else ""
            print(
                f"{label:34s} records {size['records']:6d} = {size['bytes'] / 1e6:6.2f} MB; report RSS {rss / 1024:5.0f} MB "
                f"({small_name} {base / 1024:.0f} MB): {above / 1e6:+6.2f} MB{ratio}"
            )


if __name__ == "__main__":
    main()

"""Median wall time of commands run in alternating order, for the benchmarks that time short CLI
commands against peers measured in the same run (cli_startup.py, report_plots.py): each round runs
every command once, every other round in reverse order, so drift in the machine's load falls on
all of them alike."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def medians(commands: dict[str, Callable[[int], list[str]]], repeats: int) -> dict[str, float]:
    """``{name: median seconds}``; ``commands[name](r)`` is the argv of round ``r`` (run in ROOT)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for r in range(repeats):
        for name in names if r % 2 == 0 else reversed(names):
            t0 = time.perf_counter()
            subprocess.run(commands[name](r), cwd=ROOT, check=True, capture_output=True)
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}

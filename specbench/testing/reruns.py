"""Same-config reruns among committed runs: which cells of several runs served one configuration
under one load on one machine (benchmarks/noise_floor.py prints how far they moved; the
between-runs tests check compare's noise floors against them)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

from specbench.compare.cellwise import _matching_baseline
from specbench.compare.sides import load_side
from specbench.testing import CHECKOUT

# The committed runs of one load (20 requests, concurrency 4, 64 tokens, the heads fixture): three
# studies on the 2-core Intel VM on 2026-12-03 (13:23, 16:00, 16:22 UTC) and today's default-study
# baseline (AMD EPYC, 2026-12-04; no same-machine partner among the committed runs).
DEFAULT_RUNS = [
    "52278e8:results/baselines/cpu-default",
    "results/reruns/head-variants-2026-12-03",
    "results/reruns/head-variants-mtp-2026-12-03",
    "results/reruns/seed-questions-2026-12-03",
    "results/baselines/cpu-default",
    "results/reruns/k-sweep-2026-12-03",
]
# head -> shipped (output_norm, pos0_mask), as specbench/serve/plugin/switches.py
SHIPPED = {"eagle": ("on", "off"), "deepseek_mtp": ("on", "on")}


def materialize(spec: str, tmp: Path) -> Path:
    """A run directory for ``spec``: a path, or ``REV:PATH`` extracted from git."""
    if ":" not in spec or Path(spec).exists():
        return (CHECKOUT / spec) if not Path(spec).is_absolute() else Path(spec)
    rev, path = spec.split(":", 1)
    data = subprocess.run(["git", "-C", str(CHECKOUT), "archive", rev, path], check=True, capture_output=True).stdout
    out = tmp / rev
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(out, filter="data")
    return out / path


def identity(cell: dict, manifest: dict) -> tuple:
    """What the server ran and under which load and machine; equal identities = a rerun."""
    argv, env = " ".join(cell.get("argv") or []), cell.get("env") or {}
    machine = manifest.get("machine") or {}
    settings = dict((manifest.get("resolved_config") or {}).get("load") or {})
    load = tuple(
        (k, json.dumps(settings.get(k)))
        for k in ("driver", "num_requests", "concurrency", "max_tokens", "temperature", "seed", "prompts")
    )
    model = re.search(r"serve (\S+)", argv)
    server: tuple[str, ...]
    if cell.get("is_baseline"):
        server = ("baseline",)
    else:
        found = re.search(r'"method":"([^"]+)"', argv)
        method = found.group(1) if found else "?"
        k = re.search(r'"num_speculative_tokens":(\d+)', argv)
        norm, mask = SHIPPED.get(method, ("?", "?"))
        server = (
            method,
            k.group(1) if k else "?",
            env.get("SPECBENCH_OUTPUT_NORM", norm),
            env.get("SPECBENCH_POS0_MASK", mask),
        )
    mla = "off" if env.get("VLLM_MLA_DISABLE") == "1" else "on"
    return (machine.get("hostname"), machine.get("cpu_model"), load, model.group(1) if model else "?", mla, server)


def cells_of(run: Path):
    """``[(identity, SideCell, reference SideCell or None)]`` of a run, as compare reads it."""
    side = load_side(run)
    manifest = json.loads((run / "manifest.json").read_text())
    out = []
    for cell in side.cells.values():
        rec = json.loads((run / cell.cell_ids[0] / "cell.json").read_text())
        out.append((identity(rec, manifest), cell, _matching_baseline(side, cell), side.label))
    return out

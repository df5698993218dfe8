"""Run-to-run noise of latency and throughput: how far same-config reruns on one machine move.

Evidence for compare's default noise floors (specbench/compare/noise.py, docs/methods.md
"Between-run variance"). Every cell of every run given is matched with the cells of the other runs
that served the same configuration (model, method, k, MLA, head switches with their shipped
defaults filled in, baseline or not) under the same load, on the same machine (hostname and CPU
model in the manifests). For each ordered pair of such cells (baseline -> candidate) it prints
compare's own point figures (``compare_cell``: median TTFT / ITL / e2e over requests, the load's
output tok/s, the speed-up over the run's own no-speculation cell serving the same target) and
the ratio candidate / baseline, then per metric the worst harm seen: the largest ratio for a
lower-is-better metric, the smallest for a higher-is-better one. Acceptance counts are printed
too: identical counts say the two servers computed the same thing (the shift is the machine's).

A run is a directory or ``REV:PATH`` (a run committed earlier, read with ``git archive``)::

    .venv/bin/python benchmarks/noise_floor.py                 # the committed runs (~20 s)
    .venv/bin/python benchmarks/noise_floor.py results/baselines/cpu-default /tmp/rerun --write floors.yaml
    specbench compare BASE CAND --gate e2e_p50_ms:+10% --noise-floor floors.yaml

``--write`` turns the worst harm per metric of the runs given into a ``--noise-floor`` file: run the
baseline's study two or three times on the CI machine, at different times of day, and pass them all.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import re
import subprocess
import sys
import tarfile
import tempfile
from itertools import permutations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
METRICS = ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms", "output_tok_per_s", "speedup")
# head -> shipped (output_norm, pos0_mask), as specbench/plugin/switches.py
SHIPPED = {"eagle": ("on", "off"), "deepseek_mtp": ("on", "on")}


def materialize(spec: str, tmp: Path) -> Path:
    """A run directory for ``spec``: a path, or ``REV:PATH`` extracted from git."""
    if ":" not in spec or Path(spec).exists():
        return (ROOT / spec) if not Path(spec).is_absolute() else Path(spec)
    rev, path = spec.split(":", 1)
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, path], check=True, capture_output=True).stdout
    out = tmp / rev
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(out, filter="data")
    return out / path


def identity(cell: dict, manifest: dict) -> tuple:
    """What the server ran and under which load and machine; equal identities = a rerun."""
    argv, env = " ".join(cell.get("argv") or []), cell.get("env") or {}
    machine = manifest.get("machine") or {}
    load = dict((manifest.get("resolved_config") or {}).get("load") or {})
    load = tuple(
        (k, json.dumps(load.get(k)))
        for k in ("driver", "num_requests", "concurrency", "max_tokens", "temperature", "seed", "prompts")
    )
    model = re.search(r"serve (\S+)", argv)
    if cell.get("is_baseline"):
        server = ("baseline",)
    else:
        method = re.search(r'"method":"([^"]+)"', argv)
        method = method.group(1) if method else "?"
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
    from specbench.compare.compare import _matching_baseline
    from specbench.compare.sides import load_side

    side = load_side(run)
    manifest = json.loads((run / "manifest.json").read_text())
    out = []
    for cell in side.cells.values():
        rec = json.loads((run / cell.cell_ids[0] / "cell.json").read_text())
        out.append((identity(rec, manifest), cell, _matching_baseline(side, cell), side.label))
    return out


def main(argv: list[str] | None = None) -> int:
    from specbench.compare.compare import compare_cell
    from specbench.compare.metrics import METRICS as REGISTRY

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", default=DEFAULT_RUNS)
    ap.add_argument(
        "--write",
        type=Path,
        metavar="FILE",
        help="write the worst harm per metric, rounded up to 10 points, as a --noise-floor file",
    )
    args = ap.parse_args(argv)
    worst: dict[str, tuple[float, str]] = {}
    seen: dict[str, list[float]] = {m: [] for m in METRICS}
    with tempfile.TemporaryDirectory() as tmp:
        cells = [c for spec in args.runs for c in cells_of(materialize(spec, Path(tmp)))]
    groups: dict[tuple, list] = {}
    for c in cells:
        groups.setdefault(c[0], []).append(c)
    print(f"{'cell (baseline run -> candidate run)':78s} " + " ".join(f"{m:>17s}" for m in METRICS) + "  AL")
    for _ident, members in groups.items():
        for (_, bc, br, bl), (_, cc, cr, cl) in permutations(members, 2):
            rows = {r.name: r for r in compare_cell(bc, cc, refs=(br, cr), n_resamples=200).rows}
            ratios = []
            for m in METRICS:
                r = rows.get(m)
                if r is None or not r.base or r.cand is None:
                    ratios.append("-")
                    continue
                ratio = r.cand / r.base
                seen[m].append(ratio)
                harm = ratio if not REGISTRY[m].higher_is_better else 1 / ratio
                if harm > worst.get(m, (0.0, ""))[0]:
                    worst[m] = (harm, f"{bl} {bc.name} -> {cl} {cc.name}")
                ratios.append(f"{r.base:7.4g}->{ratio:5.2f}x")
            al = rows.get("mean_acceptance_length")
            al_text = "-" if al is None else f"{al.base:.4f}/{al.cand:.4f}"
            print(
                f"{bl[:16]} {bc.name[:26]:26s} -> {cl[:16]} {cc.name[:16]:16s} "
                + " ".join(f"{x:>17s}" for x in ratios)
                + f"  {al_text}"
            )
    print("\nworst harm per metric over every ordered same-config, same-machine pair:")
    for m in METRICS:
        if m not in worst:
            print(f"  {m}: no pair")
            continue
        harm, where = worst[m]
        up = not REGISTRY[m].higher_is_better
        change = (harm - 1) if up else (1 / harm - 1)
        print(f"  {m}: {change * 100:+.0f}% ({len(seen[m])} ordered pairs; {where})")
    if args.write is not None:
        lines = [
            "# specbench compare --noise-floor: worst same-config rerun on one machine, rounded up to 10 points",
            f"# (benchmarks/noise_floor.py {' '.join(args.runs)})",
        ]
        for m, (harm, _) in worst.items():
            change = (harm - 1) if not REGISTRY[m].higher_is_better else (1 / harm - 1)
            step = math.ceil(abs(change) * 10 + 1e-9) * 10  # percentage points, rounded up
            lines.append(f"{m}: {'+' if change > 0 else '-'}{min(step, 99) if change < 0 else step}%")
        args.write.write_text("\n".join(lines) + "\n")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

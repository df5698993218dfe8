"""Run directories for compare tests, written in the documented results layout (docs/contracts.md,
"Results directory", schema_version 1) from simulated counts with known truth."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from specbench.analysis.acceptance import DEFINITION, total
from specbench.io import save_json, write_jsonl
from specbench.records.counts import Counts
from specbench.testing.simulate import simulate_units

MANIFEST = {
    "run_id": "sim",
    "specbench_version": "0",
    "vllm_version": "0.32.0",
    "config_path": "sim.yaml",
    "config_sha256": "0" * 64,
    "resolved_config": {
        "name": "sim",
        "serve": {
            "model": "fixture:target",
            "dtype": None,
            "speculative": {"method": "eagle", "draft": "fixture:draft", "num_speculative_tokens": 3},
        },
        "load": {
            "prompts": {"categories": None, "path": None},
            "temperature": 0.0,
            "max_tokens": 64,
            "seed": 0,
            "num_requests": 20,
            "concurrency": 4,
            "driver": "builtin",
        },
    },
    "machine": {
        "hostname": "h",
        "platform": "linux",
        "cpu_model": "cpu",
        "cpu_count": 2,
        "memory_gib": 24.0,
        "gpus": [],
    },
    "started_at": "2025-12-02T00:00:00Z",
    "ended_at": "2025-12-02T00:10:00Z",
    "status": "done",
}


def write_run(
    root: Path,
    cells: list[dict[str, Any]],
    *,
    run_id: str = "sim",
    seed: int = 0,
    manifest: dict[str, Any] | None = None,
) -> Path:
    """cells: {axes, p, units, drafts, spread?, repeat?, ttft_ms?: (median, sd), status?}."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    ids = [_write_cell(root, c, rng) for c in cells]
    m = copy.deepcopy(MANIFEST)
    for key, value in (manifest or {}).items():
        m[key] = value
    save_json(root / "manifest.json", {**m, "run_id": run_id, "cells": ids})
    return root


def _write_cell(root: Path, c: dict[str, Any], rng: np.random.Generator) -> str:
    """One cell's directory (acceptance.json, requests.jsonl with ``ttft_ms``, cell.json); its id."""
    cid = "__".join(f"{k}-{v}" for k, v in c["axes"].items()) + f"__r{c.get('repeat', 0)}"
    units = simulate_units(c["p"], c["units"], c["drafts"], rng, spread=c.get("spread", 0.0))
    save_json(root / cid / "acceptance.json", _acceptance(len(c["p"]), units))
    if "ttft_ms" in c:
        med, sd = c["ttft_ms"]
        write_jsonl(
            root / cid / "requests.jsonl",
            [
                {
                    "index": i,
                    "error": None,
                    "ttft_s": max(1e-4, rng.normal(med, sd)) / 1000,
                    "end_to_end_latency_s": 0.5,
                    "itl_s": [0.01, 0.012, 0.008],
                }
                for i in range(c["units"])
            ],
        )
    save_json(root / cid / "cell.json", _cell_record(cid, c))
    return cid


def _acceptance(k: int, units: list[Counts]) -> dict[str, Any]:
    tot = total(units)
    assert tot is not None, "simulated units always draft"
    return {
        "definition": DEFINITION,
        "num_spec_tokens": k,
        "prometheus": {"counts": tot.to_dict()},
        "logs": {"counts": tot.to_dict(), "windows": [tot.to_dict()]},
        "per_request": {"counts": tot.to_dict(), "units": [u.to_dict() for u in units]},
        "agreement": {"logs_vs_prometheus": True, "per_request_vs_prometheus": True, "details": {}},
        "derived": {},
        "ci": None,
        "warnings": [],
    }


def _cell_record(cid: str, c: dict[str, Any]) -> dict[str, Any]:
    return {
        "cell_id": cid,
        "axes": c["axes"],
        "repeat": c.get("repeat", 0),
        "is_baseline": False,
        "status": c.get("status", "done"),
        "reason": c.get("reason"),
        "exit_status": None,
        "log_tail": None,
        "argv": [],
        "env": {},
        "host": "127.0.0.1",
        "port": 0,
        "vllm_version": "0.32.0",
        **(claims(c["axes"], len(c["p"])) if c.get("attested", True) else {}),
    }


def claims(axes: dict[str, Any], k: int) -> dict[str, Any]:
    """cell.json ``spec`` and ``attested`` as a run of today's specbench writes them when vLLM ran
    what the cell asked for (an EAGLE head as shipped, MLA per the axis, k)."""
    mla = None if "mla" not in axes else axes["mla"] == "on"
    variant = {"output_norm": axes.get("output_norm", "on"), "pos0_mask": "off", "control": False}
    spec = {
        "method": "eagle",
        "vllm_method": "eagle",
        "draft_model": "draft",
        "num_speculative_tokens": k,
        "head_variant": variant,
        "mla": mla,
        "tp": 1,
        "dp": 1,
        "compiled": False,
    }
    attested = {
        "vllm_version": "0.32.0",
        "mla": True if mla is None else mla,
        "spec_method": "eagle",
        "num_speculative_tokens": k,
        "head_variant": variant,
        "speculation": True,
        "tp": 1,
        "dp": 1,
        "workers": 1,
        "unattested": None,
    }
    return {"spec": spec, "attested": attested}


P = [0.77, 0.55, 0.35]

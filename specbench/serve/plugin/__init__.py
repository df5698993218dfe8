"""vLLM general plugin: switch a DeepSeek draft head's final norm and position-0 mask, per server.

vLLM calls :func:`register` (entry point ``vllm.general_plugins`` / ``specbench_output_norm``) in
the API server, engine core and worker processes. The switches (environment variables, see
:mod:`specbench.serve.plugin.switches`) act on the head the server drafts with:

* the EAGLE head (``method: eagle``, vLLM's ``deepseek_eagle.py``, architecture
  ``EagleDeepSeekMTPModel``): shipped as ``output_norm on`` (norm for logits and carried state),
  ``pos0_mask off``; variants in :mod:`specbench.serve.plugin.variants`;
* the target's own MTP layer (``method: deepseek_mtp``/``mtp``, ``deepseek_mtp.py``, architecture
  ``DeepSeekMTPModel``): shipped in vLLM 0.32 as ``output_norm on`` (logits through
  ``shared_head``'s norm, the post-norm state carried, as SGLang's deepseek_nextn) and
  ``pos0_mask on``; variants in :mod:`specbench.serve.plugin.mtp_variants`.

Each head has ONE plugin class for all its variants: the variant is data (three 0-dim bool buffers,
:mod:`specbench.serve.plugin.select`) that its forward selects from with ``torch.where``, so compiled
graphs and CUDA graphs stay valid when a running server's variant is switched in place
(:mod:`specbench.serve.plugin.switch`, ``SPECBENCH_HEAD_SWITCHABLE=1``).

``output_norm``: ``on`` = final norm for logits and carried state; ``logits-only`` = norm for the
logits, the pre-norm residual sum carried (what earlier ``deepseek_mtp.py`` carried);
``off`` = no final norm at all. ``pos0_mask``: ``on`` = zero the input embedding at position 0.

Inert unless a specbench variable is set. With every switch at the head's shipped value nothing
is registered (vLLM runs as shipped), unless ``SPECBENCH_HEAD_CONTROL=1`` asks for the control (the
plugin's class at the shipped values, which must count exactly as shipped vLLM does) or
``SPECBENCH_HEAD_SWITCHABLE=1`` asks for a server whose variant can be switched.
An unknown value stops a server specbench configured (``SPECBENCH_HEAD`` set; specbench refuses it
before launch anyway) and is logged and ignored in any other server.

Why re-register architectures: vLLM rewrites a ``deepseek_v3`` draft's architectures to
``DeepSeekMTPModel`` (EAGLE prefixes it), so naming a class in a config.json selects nothing.
Trap: vLLM's compile-cache key ignores the variant, so without ``--enforce-eager`` give each
server started at a fixed variant its own ``VLLM_CACHE_ROOT`` (specbench's server does; a switchable
server gets one of its own too: :func:`specbench.serve.plugin.switches.variant_cache_key`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError
from specbench.serve.attest import ATTEST_VAR
from specbench.serve.plugin import synthetic
from specbench.serve.plugin.probe import install
from specbench.serve.plugin.switches import (
    CONTROL_VAR,
    ENV_VAR,
    HEAD_VAR,
    HEADS,
    MTP_METHODS,
    POS0_MASK_VALUES,
    POS0_MASK_VAR,
    SWITCH_VARS,
    SWITCHABLE_VAR,
    VARIANTS,
    Switches,
    any_switch_set,
    head_of_method,
    mask_label,
    switches_from_env,
)
from specbench.serve.plugin.synthetic import SYNTHETIC_VAR
from specbench.serve.vllm_main import installed_vllm_version

__all__ = [
    "CONTROL_VAR",
    "ENV_VAR",
    "HEAD_VAR",
    "HEADS",
    "MTP_METHODS",
    "PLUGIN_NAME",
    "POS0_MASK_VALUES",
    "POS0_MASK_VAR",
    "REGISTERED_ARCH",
    "SWITCH_VARS",
    "SWITCHABLE_VAR",
    "VARIANTS",
    "Switches",
    "check_variant_supported",
    "plugin_env",
    "register",
    "switches_from_env",
]

PLUGIN_NAME = "specbench_output_norm"
REGISTERED_ARCH = HEADS["eagle"][0]
MTP_ARCH = HEADS["mtp"][0]
SUPPORTED_DRAFT_ARCHS = (
    "DeepseekV3ForCausalLM",
    "DeepSeekMTPModel",
    "EagleDeepSeekMTPModel",
    "EagleDeepseekV3ForCausalLM",
)
SUPPORTED_MODEL_TYPES = ("deepseek_v3", "deepseek_mtp")
SUPPORTED = (
    "the DeepSeek-V3 EAGLE head (method 'eagle', vLLM's deepseek_eagle.py) and the DeepSeek-V3 MTP layer "
    "(method 'mtp'/'deepseek_mtp', deepseek_mtp.py)"
)
# DeepSeek heads vLLM serves with classes of their own (registry.py of the GPU wheels 0.31-0.34), which
# the variants do not re-implement: refused by name, with what is supported.
OWN_CLASS_HEADS = {
    "deepseek_v32": "DeepSeek-V3.2's MTP runs as vLLM's DeepseekV32MTP (vllm/models/deepseek_v32, "
    "registry 'DeepseekV32MTPModel'), not the DeepSeek-V3 MTP layer",
    "eagle3": "an EAGLE-3 DeepSeek head runs as vLLM's Eagle3DeepseekV2ForCausalLM (deepseek_eagle3.py), "
    "whose forward reads several target layers' hidden states: not the EAGLE head the variants re-implement",
}

# A child of vLLM's logger, so the line goes through the handler vLLM installs in every process.
logger = logging.getLogger("vllm.specbench_plugin")


def register() -> None:
    """vLLM general-plugin hook. Inert unless a specbench variable asks for a non-shipped head."""
    env = os.environ
    if env.get(ATTEST_VAR, "").strip() == "1":
        install()  # every worker prints what it runs (specbench.serve.attest reads it)
    if env.get(SYNTHETIC_VAR, "").strip() == "1":
        replaced = synthetic.install()  # only the CPU kernels that refuse synthetic mode
        if replaced:
            logger.info("specbench plugin: CPU synthetic rejection kernel installed for %s", ", ".join(replaced))
    if not any_switch_set(env):
        return  # a server specbench did not configure: touch nothing, say nothing
    try:
        switches = switches_from_env(env)
    except ConfigError as exc:
        if env.get(HEAD_VAR, "").strip():
            raise  # specbench configured this server: running it as shipped would mislabel the cell
        logger.warning(
            "specbench plugin: %s; ignored, this server runs vLLM as shipped "
            "(no SPECBENCH_HEAD: a server specbench did not configure)",
            exc,
        )
        return
    todo = switches.to_register()
    if not todo:
        where = ", ".join(f"{h} head pos0 mask {mask_label(switches.mask_for(h))}" for h in switches.heads())
        logger.info("specbench plugin: output norm on (vLLM as shipped), nothing registered (%s)", where)
        return
    from vllm.model_executor.models import ModelRegistry

    version = installed_vllm_version() or "unknown"
    for head, (norm, mask) in todo.items():
        ModelRegistry.register_model(HEADS[head][0], _variant_class(head, norm, mask, version))
        # The registry logs overrides only at DEBUG; the variant's worker-side INFO line confirms the load.
        control = " (control: the shipped forward, re-implemented)" if (norm, mask) == HEADS[head][1] else ""
        switchable = ", switchable in place" if switches.switchable else ""
        logger.info(
            "specbench plugin: %s head: output norm %r, pos0 mask %s%s%s registered for %s",
            head,
            norm,
            mask_label(mask),
            control,
            switchable,
            HEADS[head][0],
        )


def _variant_class(head: str, norm: str, mask: bool, version: str) -> type:
    """The head's one variant class, set to start at (norm, mask)."""
    from specbench.serve.plugin import mtp_variants, variants  # lazy: pulls in vllm (only inside a vLLM process)

    module: Any = variants if head == "eagle" else mtp_variants
    module.verify_wrapped_classes(version)
    module.set_initial(norm, mask)
    return module.VARIANT_CLASS


def check_variant_supported(
    draft_dir: Path | None,
    variant: str = "on",
    pos0_mask: bool | None = None,
    method: str = "eagle",
    control: bool = False,
) -> None:
    """Before launching: refuse switches the plugin cannot apply to this cell's head (ConfigError).

    ``draft_dir`` is the draft's local directory: the EAGLE head, or for an MTP method the served
    model (its MTP layer lives in the target checkpoint); None when it is not local yet (a hub model
    not downloaded): then only the values and the method are checked here.
    """
    if variant not in VARIANTS:
        raise ConfigError(f"output_norm {variant!r} is not a known variant; use one of {', '.join(VARIANTS)}")
    head = head_of_method(method)
    switches = Switches(variant, pos0_mask, control, head)
    what = _describe(switches)
    if head is None:
        _refuse_without_head(variant, pos0_mask, control, method, what)
        return
    if switches.is_shipped(head) or draft_dir is None:
        return  # vLLM as shipped: nothing to check (or no config.json to read yet)
    path = Path(draft_dir) / "config.json"
    kind = "DeepSeek-V3 EAGLE head" if head == "eagle" else "DeepSeek-V3 target with an MTP layer"
    config = _read_draft_config(path, what, kind)
    _check_draft_config(config, path, head, method, what, kind)


def _refuse_without_head(variant: str, pos0_mask: bool | None, control: bool, method: str, what: str) -> None:
    if variant == "on" and pos0_mask is None and not control:
        return
    if method in OWN_CLASS_HEADS:
        raise ConfigError(
            f"{what}: not supported for method {method!r}: {OWN_CLASS_HEADS[method]}; supported: {SUPPORTED}"
        )
    raise ConfigError(
        f"{what} switches a DeepSeek draft head (method 'eagle' with a head, or "
        f"'deepseek_mtp'); with method {method!r} it would silently do nothing: remove it"
    )


def _read_draft_config(path: Path, what: str, kind: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config not found; {what} needs a local {kind}") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config ({exc})") from None


def _check_draft_config(config: Any, path: Path, head: str, method: str, what: str, kind: str) -> None:
    archs = config.get("architectures") or []
    model_type = config.get("model_type")
    fix = f"use the shipped values (output_norm 'on', pos0_mask '{mask_label(HEADS[head][1][1])}') for this model"
    own = OWN_CLASS_HEADS.get(str(model_type)) or next(
        (OWN_CLASS_HEADS["eagle3"] for a in archs if str(a).startswith("Eagle3Deepseek")), None
    )
    if own:
        raise ConfigError(
            f"{path}: {what} is not supported for architecture {archs or None} (model_type {model_type!r}): "
            f"{own}; supported: {SUPPORTED}; {fix}"
        )
    if model_type not in SUPPORTED_MODEL_TYPES or not set(archs) & set(SUPPORTED_DRAFT_ARCHS):
        raise ConfigError(
            f"{path}: architecture {archs or None} (model_type {model_type!r}) is not a {kind}; "
            f"{what} applies only to those ({', '.join(SUPPORTED_DRAFT_ARCHS)}); "
            f"{fix} (supported variants: {', '.join(VARIANTS)})"
        )
    if head == "mtp" and not config.get("num_nextn_predict_layers"):
        raise ConfigError(
            f"{path}: num_nextn_predict_layers is {config.get('num_nextn_predict_layers')!r}: "
            f"the model has no MTP layer for method {method!r}; {fix}"
        )


def _describe(s: Switches) -> str:
    parts = [f"output_norm {s.output_norm!r}"]
    if s.pos0_mask is not None:
        parts.append(f"pos0_mask '{mask_label(s.pos0_mask)}'")
    if s.control:
        parts.append(f"{CONTROL_VAR}=1")
    return " with ".join(parts)


def plugin_env(cell_env: Mapping[str, str], method: str, base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Entries to add to a server's environment whose ``cell_env`` sets a head switch (else {}).

    ``SPECBENCH_HEAD`` tells the plugin which head the switches are for (from the cell's method) and
    that specbench configured the server. vLLM loads every installed general plugin unless
    ``VLLM_PLUGINS`` lists an allowlist; when the server's environment has one, ours is appended to
    it so the switches are not silently ignored.
    """
    if not any(str(cell_env.get(v, "")).strip() for v in (*SWITCH_VARS, ATTEST_VAR)):
        return {}
    env: dict[str, str] = {}
    head = head_of_method(method)
    switching = any(str(cell_env.get(v, "")).strip() for v in SWITCH_VARS)
    if head is not None and switching:  # another method: check_variant_supported refuses the switches before launch
        env[HEAD_VAR] = head
    base = {**(os.environ if base_env is None else base_env), **cell_env}
    if "VLLM_PLUGINS" in base:
        names = [n.strip() for n in base["VLLM_PLUGINS"].split(",") if n.strip()]
        if PLUGIN_NAME not in names:
            names.append(PLUGIN_NAME)
        env["VLLM_PLUGINS"] = ",".join(names)
    return env

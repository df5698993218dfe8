"""vLLM general plugin: switch the DeepSeek-V3 EAGLE head's final ("output") norm per server.

vLLM calls :func:`register` (entry point ``vllm.general_plugins`` / ``specbench_output_norm``) in
the API server, engine core and worker processes. ``SPECBENCH_OUTPUT_NORM`` selects the variant:

* unset or ``on`` -> nothing is registered: vLLM exactly as shipped (final norm for logits and state).
* ``off`` -> no final norm: logits and carried state from the un-normed residual sum.
* ``logits-only`` -> norm for the logits only, un-normed state carried (as DeepSeek MTP).

Why re-register ``EagleDeepSeekMTPModel``: vLLM rewrites a ``deepseek_v3`` draft's architectures to
``DeepSeekMTPModel`` and EAGLE prefixes it, so naming a class in the draft's config.json selects
nothing. Trap: vLLM's compile-cache key ignores the variant, so without ``--enforce-eager`` give each
variant its own ``VLLM_CACHE_ROOT`` (or a later server may run an earlier variant's compiled graph).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from specbench.errors import ConfigError

ENV_VAR = "SPECBENCH_OUTPUT_NORM"
PLUGIN_NAME = "specbench_output_norm"
VARIANTS = ("on", "off", "logits-only")
REGISTERED_ARCH = "EagleDeepSeekMTPModel"
SUPPORTED_DRAFT_ARCHS = ("DeepseekV3ForCausalLM", "DeepSeekMTPModel", "EagleDeepSeekMTPModel", "EagleDeepseekV3ForCausalLM")
SUPPORTED_MODEL_TYPES = ("deepseek_v3", "deepseek_mtp")

# A child of vLLM's logger, so the line goes through the handler vLLM installs in every process.
logger = logging.getLogger("vllm.specbench_plugin")


def variant_from_env(env: Mapping[str, str] | None = None) -> str:
    """The variant ``SPECBENCH_OUTPUT_NORM`` asks for (``on`` when unset); ConfigError if unknown."""
    value = (os.environ if env is None else env).get(ENV_VAR, "").strip()
    if value == "":
        return "on"
    if value not in VARIANTS:
        raise ConfigError(f"{ENV_VAR}={value!r} is not a known output-norm variant; use one of {', '.join(VARIANTS)}")
    return value


def register() -> None:
    """vLLM general-plugin hook. Inert unless ``SPECBENCH_OUTPUT_NORM`` names a variant other than on."""
    variant = variant_from_env()
    if variant == "on":
        logger.info("specbench plugin: output norm on (vLLM as shipped), nothing registered")
        return
    from vllm.model_executor.models import ModelRegistry

    from specbench.plugin import variants
    from specbench.vllm_main import installed_vllm_version

    variants.verify_wrapped_classes(installed_vllm_version() or "unknown")
    ModelRegistry.register_model(REGISTERED_ARCH, variants.VARIANT_CLASSES[variant])
    # The registry logs overrides only at DEBUG; the variant's worker-side INFO line confirms the load.
    logger.info("specbench plugin: output norm %r registered for %s", variant, REGISTERED_ARCH)


def check_variant_supported(draft_dir: Path, variant: str) -> None:
    """Before launching: refuse a variant the plugin cannot apply to this draft (ConfigError)."""
    if variant not in VARIANTS:
        raise ConfigError(f"output_norm {variant!r} is not a known variant; use one of {', '.join(VARIANTS)}")
    if variant == "on":
        return  # vLLM as shipped: nothing to check
    path = Path(draft_dir) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: draft config not found; output_norm {variant!r} needs a local DeepSeek-V3 EAGLE head") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read draft config ({exc})") from None
    archs = config.get("architectures") or []
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES or not set(archs) & set(SUPPORTED_DRAFT_ARCHS):
        raise ConfigError(
            f"{path}: draft architecture {archs or None} (model_type {model_type!r}) is not a DeepSeek-V3 EAGLE head; "
            f"output_norm {variant!r} applies only to those ({', '.join(SUPPORTED_DRAFT_ARCHS)}); "
            f"use output_norm 'on' for this draft (supported variants: {', '.join(VARIANTS)})"
        )


def plugin_env(variant: str, base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment entries a server needs for ``variant`` (merge them into its environment).

    vLLM loads every installed general plugin unless ``VLLM_PLUGINS`` lists an allowlist; when the
    user's environment has one, ours is appended to it so the variant is not silently ignored.
    """
    if variant not in VARIANTS:
        raise ConfigError(f"output_norm {variant!r} is not a known variant; use one of {', '.join(VARIANTS)}")
    env = {ENV_VAR: variant}
    base = os.environ if base_env is None else base_env
    if "VLLM_PLUGINS" in base:
        names = [n.strip() for n in base["VLLM_PLUGINS"].split(",") if n.strip()]
        if PLUGIN_NAME not in names:
            names.append(PLUGIN_NAME)
        env["VLLM_PLUGINS"] = ",".join(names)
    return env

"""vLLM general plugin: switch the DeepSeek-V3 EAGLE head's final norm and position-0 mask per server.

vLLM calls :func:`register` (entry point ``vllm.general_plugins`` / ``specbench_output_norm``) in
the API server, engine core and worker processes. Two environment variables select the variant:

``SPECBENCH_OUTPUT_NORM`` (the ``output_norm`` axis):

* unset or ``on`` -> vLLM 0.32's EAGLE head as shipped: final norm for logits and carried state.
* ``off`` -> no final norm: logits and carried state from the un-normed residual sum.
* ``logits-only`` -> norm for the logits only, the un-normed sum carried. vLLM's ``deepseek_mtp.py``
  did this before 2026; vLLM 0.32's MTP layer carries the post-norm state (as ``on`` does).

``SPECBENCH_POS0_MASK`` (an ``env:`` axis): unset or ``off`` -> as shipped (the EAGLE head does not
mask); ``on`` -> zero the input embedding at position 0, as vLLM 0.32's ``deepseek_mtp.py`` does.

With both as shipped nothing is registered. Why re-register ``EagleDeepSeekMTPModel``: vLLM rewrites
a ``deepseek_v3`` draft's architectures to ``DeepSeekMTPModel`` and EAGLE prefixes it, so naming a
class in the draft's config.json selects nothing. These switches act on ``method: eagle`` only:
``method: deepseek_mtp`` builds ``DeepSeekMTP``, which the plugin never touches. Trap: vLLM's
compile-cache key ignores the variant, so without ``--enforce-eager`` give each variant its own
``VLLM_CACHE_ROOT`` (or a later server may run an earlier variant's compiled graph).
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
POS0_MASK_VAR = "SPECBENCH_POS0_MASK"
POS0_MASK_VALUES = ("off", "on")
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


def pos0_mask_from_env(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``SPECBENCH_POS0_MASK`` asks for the position-0 mask (off when unset); ConfigError if unknown."""
    value = (os.environ if env is None else env).get(POS0_MASK_VAR, "").strip()
    if value in ("", "off"):
        return False
    if value == "on":
        return True
    raise ConfigError(f"{POS0_MASK_VAR}={value!r} is not a known pos0-mask value; use one of {', '.join(POS0_MASK_VALUES)}")


def register() -> None:
    """vLLM general-plugin hook. Inert unless a specbench variable asks for a non-shipped variant."""
    variant, mask = variant_from_env(), pos0_mask_from_env()
    if variant == "on" and not mask:
        logger.info("specbench plugin: output norm on (vLLM as shipped), nothing registered")
        return
    from vllm.model_executor.models import ModelRegistry

    from specbench.plugin import variants
    from specbench.vllm_main import installed_vllm_version

    variants.verify_wrapped_classes(installed_vllm_version() or "unknown")
    ModelRegistry.register_model(REGISTERED_ARCH, variants.VARIANT_CLASSES[(variant, mask)])
    # The registry logs overrides only at DEBUG; the variant's worker-side INFO line confirms the load.
    logger.info("specbench plugin: output norm %r, pos0 mask %s registered for %s",
                variant, "on" if mask else "off", REGISTERED_ARCH)


def check_variant_supported(draft_dir: Path, variant: str, pos0_mask: bool = False, method: str = "eagle") -> None:
    """Before launching: refuse a variant the plugin cannot apply to this draft (ConfigError)."""
    if variant not in VARIANTS:
        raise ConfigError(f"output_norm {variant!r} is not a known variant; use one of {', '.join(VARIANTS)}")
    if variant == "on" and not pos0_mask:
        return  # vLLM as shipped: nothing to check
    # Names the switches that need the head, in the errors below.
    what = f"output_norm {variant!r}" + (f" with {POS0_MASK_VAR}='on'" if pos0_mask else "")
    fix = f"use output_norm 'on'{f' and {POS0_MASK_VAR}=off' if pos0_mask else ''} for this draft"
    if method != "eagle":  # e.g. deepseek_mtp builds DeepSeekMTP, which the plugin does not replace
        raise ConfigError(f"{what} switches the DeepSeek EAGLE head (method 'eagle'); with method {method!r} "
                          f"it would silently do nothing: {fix}")
    path = Path(draft_dir) / "config.json"
    from specbench.io import read_text

    text = read_text(path, "draft config", missing=f"{what} needs a local DeepSeek-V3 EAGLE head", error=ConfigError)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: cannot read draft config ({exc})") from None
    archs = config.get("architectures") or []
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES or not set(archs) & set(SUPPORTED_DRAFT_ARCHS):
        raise ConfigError(
            f"{path}: draft architecture {archs or None} (model_type {model_type!r}) is not a DeepSeek-V3 EAGLE head; "
            f"{what} applies only to those ({', '.join(SUPPORTED_DRAFT_ARCHS)}); "
            f"{fix} (supported variants: {', '.join(VARIANTS)})"
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

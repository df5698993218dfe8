"""specbench.plugin: registration logic, pre-launch checks and server environment (no server)."""

from __future__ import annotations

import importlib.metadata as md
import json
import logging

import pytest

from specbench.errors import ConfigError
from specbench.plugin import (
    ENV_VAR, PLUGIN_NAME, POS0_MASK_VAR, REGISTERED_ARCH, check_variant_supported, plugin_env, pos0_mask_from_env,
    register, variant_from_env,
)


@pytest.fixture
def registry(monkeypatch):
    """vLLM's real ModelRegistry, with its entry for the EAGLE head restored after the test."""
    from vllm.model_executor.models import ModelRegistry

    monkeypatch.setitem(ModelRegistry.models, REGISTERED_ARCH, ModelRegistry.models[REGISTERED_ARCH])
    return ModelRegistry


def test_entry_point_is_declared():
    eps = {ep.name: ep.value for ep in md.entry_points(group="vllm.general_plugins")}
    assert eps.get(PLUGIN_NAME) == "specbench.plugin:register"


@pytest.mark.parametrize("value", [None, "", "on"])
def test_on_or_unset_registers_nothing(registry, monkeypatch, caplog, value):
    monkeypatch.setenv(POS0_MASK_VAR, "off")
    if value is None:
        monkeypatch.delenv(ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(ENV_VAR, value)
    before = dict(registry.models)
    with caplog.at_level(logging.INFO, logger="vllm.specbench_plugin"):
        register()
    assert registry.models == before
    assert "nothing registered" in caplog.text


# ("on", no mask) is vLLM as shipped: test_on_or_unset_registers_nothing covers it.
@pytest.mark.parametrize("variant,mask", [("off", None), ("logits-only", None), ("off", "on"),
                                          ("logits-only", "on"), ("on", "on")])
def test_variant_replaces_the_eagle_head(registry, monkeypatch, variant, mask):
    from vllm.model_executor.models import deepseek_eagle

    monkeypatch.setenv(ENV_VAR, variant)
    if mask is None:
        monkeypatch.delenv(POS0_MASK_VAR, raising=False)
    else:
        monkeypatch.setenv(POS0_MASK_VAR, mask)
    shipped = registry.models[REGISTERED_ARCH]
    register()
    cls = registry.models[REGISTERED_ARCH].model_cls
    assert registry.models[REGISTERED_ARCH] is not shipped
    assert issubclass(cls, deepseek_eagle.EagleDeepseekV3ForCausalLM)
    assert variant.replace("-", "").lower() in cls.__name__.lower()
    assert ("pos0mask" in cls.__name__.lower()) == (mask == "on")


def test_pos0_mask_values(monkeypatch):
    assert pos0_mask_from_env({}) is False
    assert pos0_mask_from_env({POS0_MASK_VAR: " on "}) is True
    assert pos0_mask_from_env({POS0_MASK_VAR: "off"}) is False
    with pytest.raises(ConfigError, match=r"SPECBENCH_POS0_MASK='1'.*off, on"):
        pos0_mask_from_env({POS0_MASK_VAR: "1"})


@pytest.mark.parametrize(("variant", "mask", "expect"), [
    ("on", False, ("norm", "norm")), ("logits-only", False, ("norm", "sum")), ("off", False, ("sum", "sum")),
    ("on", True, ("norm", "norm")), ("logits-only", True, ("norm", "sum")),
])
def test_variant_forward_returns_and_masks_as_named(variant, mask, expect):
    """Runs each variant's forward (vLLM's real construction needs a server) on a stub module.

    Stub layers record what they are given, so the test sees the position-0 mask act on the input
    embedding and the variant pick (norm, sum) outputs of the fused final norm.
    """
    import torch

    from specbench.plugin import variants

    forward = variants._forward_for(variant, mask)
    seen = {}

    class Stub:
        embed_tokens = staticmethod(lambda ids: ids.float().unsqueeze(-1).repeat(1, 2) + 1.0)
        enorm = staticmethod(lambda x: seen.setdefault("enorm_in", x))
        hnorm = staticmethod(lambda h: h)
        fc = staticmethod(lambda x: x[:, :2] + x[:, 2:])
        layers = [lambda pos, h, r: (h, h * 0 + 10.0)]
        norm = staticmethod(lambda h, r: (torch.full_like(h, -1.0), h + r))

    positions = torch.tensor([0, 1, 2])
    out = forward(Stub(), torch.tensor([5, 6, 7]), positions, torch.zeros(3, 2))
    first_row = seen["enorm_in"][0]
    assert bool((first_row == 0).all()) == mask  # masked only at position 0
    assert bool((seen["enorm_in"][1:] != 0).all())
    summed = seen["enorm_in"] + 10.0  # fc(embed, hidden 0) + the layer's residual 10
    values = {"norm": torch.full((3, 2), -1.0), "sum": summed}
    torch.testing.assert_close(out[0], values[expect[0]])
    torch.testing.assert_close(out[1], values[expect[1]])


def test_unknown_value_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "Off")
    with pytest.raises(ConfigError, match=r"SPECBENCH_OUTPUT_NORM='Off'.*on, off, logits-only"):
        register()
    assert variant_from_env({ENV_VAR: " off "}) == "off"


def test_mismatched_vllm_head_names_version_and_what_is_missing(monkeypatch):
    from specbench.plugin import variants

    class Headless:  # stands in for a future vLLM whose inner model lost its attributes
        def forward(self, input_ids, positions, hidden_states): ...

    monkeypatch.setattr(variants, "_BASE_INNER", Headless)
    with pytest.raises(RuntimeError, match=r"vLLM 9\.9\.9: missing .*DeepseekV2Model\.norm"):
        variants.verify_wrapped_classes("9.9.9")


def _draft(tmp_path, **config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_check_variant_supported_names_the_architecture(tmp_path):
    llama = _draft(tmp_path, architectures=["LlamaForCausalLM"], model_type="llama")
    with pytest.raises(ConfigError, match=r"LlamaForCausalLM.*supported variants: on, off, logits-only"):
        check_variant_supported(llama, "off")
    check_variant_supported(llama, "on")  # vLLM as shipped works with any draft
    with pytest.raises(ConfigError, match="not a known variant"):
        check_variant_supported(llama, "none")


def test_pos0_mask_needs_a_deepseek_head(tmp_path):
    llama = _draft(tmp_path, architectures=["LlamaForCausalLM"], model_type="llama")
    with pytest.raises(ConfigError, match=r"LlamaForCausalLM.*SPECBENCH_POS0_MASK='on'.*use output_norm 'on' and SPECBENCH_POS0_MASK=off"):
        check_variant_supported(llama, "on", pos0_mask=True)


def test_check_variant_supported_accepts_deepseek_heads(tmp_path):
    check_variant_supported(_draft(tmp_path, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3"), "off")
    with pytest.raises(ConfigError, match="config.json: draft config not found"):
        check_variant_supported(tmp_path / "missing", "logits-only")


def test_plugin_env(monkeypatch):
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    assert plugin_env("off") == {ENV_VAR: "off"}
    assert plugin_env("on", {"VLLM_PLUGINS": "lora_resolver"}) == {
        ENV_VAR: "on", "VLLM_PLUGINS": f"lora_resolver,{PLUGIN_NAME}"}
    assert plugin_env("off", {"VLLM_PLUGINS": f" {PLUGIN_NAME} "})["VLLM_PLUGINS"] == PLUGIN_NAME
    assert plugin_env("off", {"VLLM_PLUGINS": ""})["VLLM_PLUGINS"] == PLUGIN_NAME
    with pytest.raises(ConfigError):
        plugin_env("maybe")

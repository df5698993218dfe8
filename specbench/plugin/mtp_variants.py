"""Head variants of vLLM's DeepSeek MTP layer (``method: deepseek_mtp``; imported only inside vLLM).

vLLM 0.32's ``deepseek_mtp.DeepSeekMultiTokenPredictorLayer.forward`` zeroes the input embedding
at position 0 (``torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)``), runs ``enorm`` /
``hnorm`` / ``eh_proj`` and the decoder block, and returns ``(sum, shared_head(sum))``: the pre-norm
residual sum goes to ``compute_logits``, which applies ``shared_head``'s norm (the final norm) and
head; the post-norm state is carried into the next draft step ("matches SGLang's deepseek_nextn").
Before that change vLLM carried the pre-norm sum. Two switches, composable:

* output norm: ``on`` -> as shipped; ``logits-only`` -> ``(sum, sum)``: logits still normed, the
  pre-norm sum carried (older vLLM); ``off`` -> ``(sum, sum)`` and logits from the head applied to
  the un-normed sum (``compute_logits`` without ``shared_head``'s norm).
* pos0 mask: ``on`` -> as shipped; ``off`` -> the input embedding at position 0 is kept.

``DeepSeekMTP`` is the class vLLM compiles (``support_torch_compile``); its layers are built by
``DeepSeekMultiTokenPredictor`` from the module-global ``DeepSeekMultiTokenPredictorLayer``, so the
variant points that name at its layer class while vLLM's own constructor runs (as the EAGLE side
does), and every layer exists as the variant before anything is traced.
"""

from __future__ import annotations

import inspect
import logging
import threading

import torch

from vllm.distributed import tensor_model_parallel_all_gather
from vllm.model_executor.models import deepseek_mtp

from specbench.plugin.attest import stamp
from specbench.plugin.switches import unchecked_source

logger = logging.getLogger("vllm.specbench_plugin")

LAYER_ATTRS = ("enorm", "hnorm", "eh_proj", "shared_head", "mtp_block")
FORWARD_PARAMS = ["self", "input_ids", "positions", "previous_hidden_states", "inputs_embeds", "spec_step_index"]
# What the re-implementation below assumes vLLM ships (0.32); checked in the installed source.
SHIPPED_LINES = {
    "the position-0 mask": "torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)",
    "the post-norm carried state": "return hidden_states, self.shared_head(hidden_states)",
}
VARIANTS = ("on", "off", "logits-only")

_BASE_LAYER = deepseek_mtp.DeepSeekMultiTokenPredictorLayer
_construct_lock = threading.Lock()


def _forward_for(variant: str, pos0_mask: bool):
    carry_normed = variant == "on"

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, previous_hidden_states: torch.Tensor,
                inputs_embeds: torch.Tensor | None = None, spec_step_index: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        # vLLM 0.32's forward, line for line, apart from the two switches.
        assert inputs_embeds is not None
        if pos0_mask:
            inputs_embeds = torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)
        inputs_embeds = self.enorm(inputs_embeds)
        previous_hidden_states = self.hnorm(previous_hidden_states)
        hidden_states = self.eh_proj(torch.cat([inputs_embeds, previous_hidden_states], dim=-1))
        hidden_states, residual = self.mtp_block(positions=positions, hidden_states=hidden_states, residual=None)
        hidden_states = residual + hidden_states
        if self.mtp_block.use_sequence_parallel_moe:
            hidden_states = tensor_model_parallel_all_gather(hidden_states, 0)
            hidden_states = hidden_states[: positions.shape[0]]
        return hidden_states, (self.shared_head(hidden_states) if carry_normed else hidden_states)

    return stamp(forward, variant, pos0_mask)


def class_suffix(variant: str, pos0_mask: bool) -> str:
    return "OutputNorm" + variant.title().replace("-", "") + ("Pos0Mask" if pos0_mask else "NoPos0Mask")


def _make_layer(variant: str, pos0_mask: bool) -> type:
    mask = "on" if pos0_mask else "off"

    def __init__(self, *args, **kwargs):
        _BASE_LAYER.__init__(self, *args, **kwargs)
        missing = [a for a in LAYER_ATTRS if not hasattr(self, a)]
        if missing:
            raise RuntimeError(f"specbench output_norm '{variant}': vLLM's deepseek_mtp layer has no {missing}; "
                               "this vLLM's MTP layer differs from the one the plugin was written for (vLLM 0.32)")
        # The same line as the EAGLE side's, so a log check reads both heads alike.
        logger.info("specbench output_norm variant '%s' loaded (pos0_mask %s): %s", variant, mask,
                    type(self).__qualname__)

    name = "DeepSeekMultiTokenPredictorLayer" + class_suffix(variant, pos0_mask)
    namespace = {"__init__": __init__, "forward": _forward_for(variant, pos0_mask), "__module__": __name__}
    return type(name, (_BASE_LAYER,), namespace)


def _compute_logits_unnormed(self, hidden_states: torch.Tensor, spec_step_idx: int = 0) -> torch.Tensor:
    """``DeepSeekMultiTokenPredictor.compute_logits`` without ``shared_head``'s norm (``off``)."""
    predictor = self.model
    layer = predictor.layers[str(predictor.mtp_start_layer_idx + spec_step_idx % predictor.num_mtp_layers)]
    return predictor.logits_processor(layer.shared_head.head, hidden_states)


def _make_outer(variant: str, pos0_mask: bool, layer: type) -> type:
    def __init__(self, *, vllm_config, prefix: str = ""):
        with _construct_lock:
            deepseek_mtp.DeepSeekMultiTokenPredictorLayer = layer
            try:
                deepseek_mtp.DeepSeekMTP.__init__(self, vllm_config=vllm_config, prefix=prefix)
            finally:
                deepseek_mtp.DeepSeekMultiTokenPredictorLayer = _BASE_LAYER
        built = {type(m).__name__ for m in self.model.layers.values()}
        if built != {layer.__name__}:
            raise RuntimeError(f"specbench output_norm '{variant}': DeepSeekMTP built {sorted(built)}, not the variant; "
                               "this vLLM's MTP model constructs its layers differently")

    namespace = {"__init__": __init__, "__module__": __name__}
    if variant == "off":
        namespace["compute_logits"] = _compute_logits_unnormed
    return type("DeepSeekMTP" + class_suffix(variant, pos0_mask), (deepseek_mtp.DeepSeekMTP,), namespace)


def verify_wrapped_classes(vllm_version: str) -> None:
    """Raise RuntimeError naming the vLLM version and what is missing if the MTP layer is not as expected."""
    other = unchecked_source("mtp", deepseek_mtp.__file__, vllm_version)
    if other:
        raise RuntimeError(f"specbench head-variant plugin refuses: {other}; use the shipped values "
                           "(output_norm on, pos0_mask on) or one of those vLLM releases")
    problems = []
    for name in ("DeepSeekMTP", "DeepSeekMultiTokenPredictor", "DeepSeekMultiTokenPredictorLayer"):
        if not isinstance(getattr(deepseek_mtp, name, None), type):
            problems.append(f"deepseek_mtp.{name}")
    if isinstance(_BASE_LAYER, type):
        params = list(inspect.signature(_BASE_LAYER.forward).parameters)
        if params != FORWARD_PARAMS:
            problems.append(f"DeepSeekMultiTokenPredictorLayer.forward{tuple(FORWARD_PARAMS[1:])} (found {tuple(params[1:])})")
        layer_src = inspect.getsource(_BASE_LAYER)
        problems += [f"DeepSeekMultiTokenPredictorLayer.{a}" for a in LAYER_ATTRS if f"self.{a} =" not in layer_src]
        forward_src = inspect.getsource(_BASE_LAYER.forward)
        problems += [f"{what} (`{line}`) in the layer's forward" for what, line in SHIPPED_LINES.items()
                     if line not in forward_src]
    predictor = getattr(deepseek_mtp, "DeepSeekMultiTokenPredictor", None)
    if isinstance(predictor, type):
        src = inspect.getsource(predictor)
        problems += [f"DeepSeekMultiTokenPredictor {what}" for what in
                     ("DeepSeekMultiTokenPredictorLayer(", "self.logits_processor =", "self.mtp_start_layer_idx =",
                      "mtp_layer.shared_head(hidden_states)") if what not in src]
    if problems:
        raise RuntimeError(
            f"specbench head-variant plugin cannot wrap vLLM {vllm_version}'s MTP layer: missing {', '.join(problems)}; "
            "use the shipped values (output_norm on, pos0_mask on) or a vLLM whose deepseek_mtp.py matches 0.32"
        )


# (output_norm, pos0_mask) -> model class. ("on", True) is vLLM as shipped: the plugin registers it
# only as the control (SPECBENCH_HEAD_CONTROL=1), to show the re-implementation counts as vLLM does.
VARIANT_CLASSES = {
    (v, m): _make_outer(v, m, _make_layer(v, m)) for v in VARIANTS for m in (False, True)
}

"""Head variants of vLLM's DeepSeek MTP layer, as data (``method: deepseek_mtp``; imported only inside vLLM).

vLLM 0.32's ``deepseek_mtp.DeepSeekMultiTokenPredictorLayer.forward`` zeroes the input embedding
at position 0 (``torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)``), runs ``enorm`` /
``hnorm`` / ``eh_proj`` and the decoder block, and returns ``(sum, shared_head(sum))``: the pre-norm
residual sum goes to ``compute_logits``, which applies ``shared_head``'s norm (the final norm) and
head; the post-norm state is carried into the next draft step ("matches SGLang's deepseek_nextn").
Before that change vLLM carried the pre-norm sum. Two switches, composable:

* output norm: ``on`` -> as shipped; ``logits-only`` -> logits still normed, the pre-norm sum
  carried (older vLLM); ``off`` -> the pre-norm sum carried and logits from the head applied to
  the un-normed sum (``compute_logits`` without ``shared_head``'s norm).
* pos0 mask: ``on`` -> as shipped; ``off`` -> the input embedding at position 0 is kept.

As on the EAGLE side (:mod:`specbench.serve.plugin.variants`), one class serves all six variants: each
MTP layer holds the three variant buffers (:mod:`specbench.serve.plugin.select`) that its forward and the
model's ``compute_logits`` select from with ``torch.where``; a switch writes them in place.

``DeepSeekMTP`` is the class vLLM compiles (``support_torch_compile``); its layers are built by
``DeepSeekMultiTokenPredictor`` from the module-global ``DeepSeekMultiTokenPredictorLayer``, so the
variant class points that name at its layer class while vLLM's own constructor runs, and every layer
exists as the variant layer before anything is traced. ``compute_logits`` runs outside the compiled
graph (vLLM calls it on the forward's output), so it reads the buffers on every call too.
"""

from __future__ import annotations

import inspect
import logging
import threading

import torch
from vllm.distributed import tensor_model_parallel_all_gather
from vllm.model_executor.models import deepseek_mtp

from specbench.serve.plugin import select, swap
from specbench.serve.plugin.switches import unchecked_source

logger = logging.getLogger("vllm.specbench_plugin")

LAYER_ATTRS = ("enorm", "hnorm", "eh_proj", "shared_head", "mtp_block")
FORWARD_PARAMS = ["self", "input_ids", "positions", "previous_hidden_states", "inputs_embeds", "spec_step_index"]
# What the re-implementation below assumes vLLM ships (0.32); checked in the installed source.
SHIPPED_LINES = {
    "the position-0 mask": "torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)",
    "the post-norm carried state": "return hidden_states, self.shared_head(hidden_states)",
}
SHIPPED = ("on", True)

_BASE_LAYER = deepseek_mtp.DeepSeekMultiTokenPredictorLayer
_construct_lock = threading.Lock()
_initial = {"variant": SHIPPED}


def set_initial(output_norm: str, pos0_mask: bool) -> None:
    """The variant the next MTP model built in this process starts with (the server's environment)."""
    select.NORM_FLAGS[output_norm]  # KeyError for an unknown value, before anything is built
    _initial["variant"] = (output_norm, bool(pos0_mask))


def layer_forward(
    self,
    input_ids: torch.Tensor,
    positions: torch.Tensor,
    previous_hidden_states: torch.Tensor,
    inputs_embeds: torch.Tensor | None = None,
    spec_step_index: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM 0.32's forward, line for line, but for the mask and the carried state, which read the
    layer's buffers."""
    assert inputs_embeds is not None
    inputs_embeds = select.mask_pos0(self, inputs_embeds, positions)
    inputs_embeds = self.enorm(inputs_embeds)
    previous_hidden_states = self.hnorm(previous_hidden_states)
    hidden_states = self.eh_proj(torch.cat([inputs_embeds, previous_hidden_states], dim=-1))
    hidden_states, residual = self.mtp_block(positions=positions, hidden_states=hidden_states, residual=None)
    hidden_states = residual + hidden_states
    if self.mtp_block.use_sequence_parallel_moe:
        hidden_states = tensor_model_parallel_all_gather(hidden_states, 0)
        hidden_states = hidden_states[: positions.shape[0]]
    return hidden_states, select.carried(self, self.shared_head(hidden_states), hidden_states)


def compute_logits(self, hidden_states: torch.Tensor, spec_step_idx: int = 0) -> torch.Tensor:
    """``DeepSeekMultiTokenPredictor.compute_logits``, with ``shared_head``'s norm selected by the
    layer's buffers (``off``: the head applied to the un-normed sum)."""
    predictor = self.model
    layer = predictor.layers[str(predictor.mtp_start_layer_idx + spec_step_idx % predictor.num_mtp_layers)]
    picked = select.for_logits(layer, layer.shared_head(hidden_states), hidden_states)
    return predictor.logits_processor(layer.shared_head.head, picked)


def _layer_init(self, *args, **kwargs):
    _BASE_LAYER.__init__(self, *args, **kwargs)
    select.init_variant_module(self, LAYER_ATTRS, "deepseek_mtp layer", _initial["variant"], logger)


VariantLayer = type(
    "DeepSeekMultiTokenPredictorLayerSpecbenchVariants",
    (_BASE_LAYER,),
    {"__init__": _layer_init, "forward": layer_forward, "__module__": __name__},
)


def _outer_init(self, *, vllm_config, prefix: str = ""):
    # DeepSeekMultiTokenPredictor builds ``deepseek_mtp.DeepSeekMultiTokenPredictorLayer(...)`` by module global.
    with swap.pointed_at(deepseek_mtp, "DeepSeekMultiTokenPredictorLayer", VariantLayer, _BASE_LAYER, _construct_lock):
        deepseek_mtp.DeepSeekMTP.__init__(self, vllm_config=vllm_config, prefix=prefix)
    built = {type(m).__name__ for m in self.model.layers.values()}
    if built != {VariantLayer.__name__}:
        raise RuntimeError(
            f"specbench head variants: DeepSeekMTP built {sorted(built)}, not the variant layer; "
            "this vLLM's MTP model constructs its layers differently"
        )


# The one class the plugin registers for DeepSeekMTPModel, whatever the variant.
VARIANT_CLASS = type(
    "DeepSeekMTPSpecbenchVariants",
    (deepseek_mtp.DeepSeekMTP,),
    {"__init__": _outer_init, "compute_logits": compute_logits, "__module__": __name__},
)


def verify_wrapped_classes(vllm_version: str) -> None:
    """Raise RuntimeError naming the vLLM version and what is missing if the MTP layer is not as expected."""
    other = unchecked_source("mtp", deepseek_mtp.__file__, vllm_version)
    if other:
        raise RuntimeError(
            f"specbench head-variant plugin refuses: {other}; use the shipped values "
            "(output_norm on, pos0_mask on) or one of those vLLM releases"
        )
    # With use_local_argmax_reduction, vLLM's V2 speculator drafts through model.get_top_tokens instead
    # of compute_logits (v1/worker/gpu/spec_decode/speculator.py, 0.31-0.34), where the variants select
    # the logits' norm. DeepSeekMTP has no get_top_tokens in 0.29-0.34 (vLLM then refuses the option
    # itself); a release that adds one would bypass the variants silently: refused here.
    if hasattr(getattr(deepseek_mtp, "DeepSeekMTP", None), "get_top_tokens"):
        raise RuntimeError(
            f"specbench head-variant plugin refuses: vLLM {vllm_version}'s DeepSeekMTP has get_top_tokens, which "
            "use_local_argmax_reduction calls instead of compute_logits, where the MTP variants select; "
            "use the shipped values (output_norm on, pos0_mask on) or a release without it (0.29-0.34)"
        )
    problems = []
    for name in ("DeepSeekMTP", "DeepSeekMultiTokenPredictor", "DeepSeekMultiTokenPredictorLayer"):
        if not isinstance(getattr(deepseek_mtp, name, None), type):
            problems.append(f"deepseek_mtp.{name}")
    if inspect.isclass(_BASE_LAYER):
        params = list(inspect.signature(_BASE_LAYER.forward).parameters)
        if params != FORWARD_PARAMS:
            problems.append(
                f"DeepSeekMultiTokenPredictorLayer.forward{tuple(FORWARD_PARAMS[1:])} (found {tuple(params[1:])})"
            )
        layer_src = inspect.getsource(_BASE_LAYER)
        problems += [f"DeepSeekMultiTokenPredictorLayer.{a}" for a in LAYER_ATTRS if f"self.{a} =" not in layer_src]
        forward_src = inspect.getsource(_BASE_LAYER.forward)
        problems += [
            f"{what} (`{line}`) in the layer's forward"
            for what, line in SHIPPED_LINES.items()
            if line not in forward_src
        ]
    predictor = getattr(deepseek_mtp, "DeepSeekMultiTokenPredictor", None)
    if isinstance(predictor, type):
        src = inspect.getsource(predictor)
        problems += [
            f"DeepSeekMultiTokenPredictor {what}"
            for what in (
                "DeepSeekMultiTokenPredictorLayer(",
                "self.logits_processor =",
                "self.mtp_start_layer_idx =",
                "mtp_layer.shared_head(hidden_states)",
            )
            if what not in src
        ]
    if problems:
        raise RuntimeError(
            f"specbench head-variant plugin cannot wrap vLLM {vllm_version}'s MTP layer: missing {', '.join(problems)}; "
            "use the shipped values (output_norm on, pos0_mask on) or a vLLM whose deepseek_mtp.py matches 0.32"
        )

"""Head variants of vLLM's DeepSeek-V3 EAGLE head, as data (imported only inside vLLM processes).

vLLM 0.32's ``deepseek_eagle.DeepseekV2Model.forward`` ends with ``self.norm(hidden_states, residual)``,
an RMSNorm fused with the residual add, which returns ``(norm(sum), sum)``; it hands back
``(norm, norm)``: the first for logits, the second carried to the next draft step. It does not mask
position 0. Two switches, composable:

* output norm: ``off`` -> ``(sum, sum)``: no final norm at all; ``logits-only`` -> ``(norm, sum)``:
  norm for logits only, the un-normed sum carried (what earlier vLLM's ``deepseek_mtp.py``
  carried; vLLM 0.32's MTP layer carries the post-norm state, as ``on`` does here).
* pos0 mask: ``on`` -> zero the input embedding at position 0 before ``enorm``, exactly as vLLM
  0.32's ``deepseek_mtp.py`` does (``torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)``).

One class serves all six variants: its forward selects with ``torch.where`` from three 0-dim bool
buffers on the inner model (:mod:`specbench.serve.plugin.select`), so a compiled graph and captured CUDA
graphs hold no variant of their own, and :mod:`specbench.serve.plugin.switch` switches a running server
by writing those buffers. The variant it starts with comes from the environment
(:func:`set_initial`, called by the plugin's ``register``). At ``("on", False)`` it computes the
shipped forward, bit for bit (the control, tests/serve/plugin/test_control_vllm.py). The MTP layer's
counterpart is :mod:`specbench.serve.plugin.mtp_variants`.

The inner model must be *constructed* as this class: vLLM's compile wrapper captures ``forward``
when the module is built, so swapping classes or methods afterwards would not take.
"""

from __future__ import annotations

import inspect
import logging
import threading

import torch
from vllm.model_executor.models import deepseek_eagle

from specbench.serve.plugin import select, swap
from specbench.serve.plugin.switches import unchecked_source

# A child of vLLM's logger, so the line goes through the handler vLLM installs in every process.
logger = logging.getLogger("vllm.specbench_plugin")

INNER_ATTRS = ("embed_tokens", "enorm", "hnorm", "fc", "layers", "norm")
FORWARD_PARAMS = ["self", "input_ids", "positions", "hidden_states"]
SHIPPED = ("on", False)

_BASE_INNER = deepseek_eagle.DeepseekV2Model
_construct_lock = threading.Lock()
_initial = {"variant": SHIPPED}


def set_initial(output_norm: str, pos0_mask: bool) -> None:
    """The variant the next head built in this process starts with (the server's environment)."""
    select.NORM_FLAGS[output_norm]  # KeyError for an unknown value, before anything is built
    _initial["variant"] = (output_norm, bool(pos0_mask))


def variant_forward(self, input_ids: torch.Tensor, positions: torch.Tensor, hidden_states: torch.Tensor):
    """vLLM 0.32's forward, line for line, but for the mask and the (logits, carried) pick, which
    read the module's buffers."""
    embeds = select.mask_pos0(self, self.embed_tokens(input_ids), positions)
    inputs = torch.cat([self.enorm(embeds), self.hnorm(hidden_states)], dim=-1)
    hidden_states = self.fc(inputs)
    residual = None
    for layer in self.layers:
        hidden_states, residual = layer(positions, hidden_states, residual)
    normed, summed = self.norm(hidden_states, residual)
    return select.for_logits(self, normed, summed), select.carried(self, normed, summed)


def _inner_init(self, *args, **kwargs):
    _BASE_INNER.__init__(self, *args, **kwargs)
    select.init_variant_module(self, INNER_ATTRS, "deepseek_eagle.DeepseekV2Model", _initial["variant"], logger)


VariantInner = type(
    "DeepseekV2ModelSpecbenchVariants",
    (_BASE_INNER,),
    {"__init__": _inner_init, "forward": variant_forward, "__module__": __name__},
)


def _outer_init(self, *, vllm_config, prefix: str = ""):
    # EagleDeepseekV3ForCausalLM.__init__ builds ``deepseek_eagle.DeepseekV2Model(...)`` by module global.
    with swap.pointed_at(deepseek_eagle, "DeepseekV2Model", VariantInner, _BASE_INNER, _construct_lock):
        deepseek_eagle.EagleDeepseekV3ForCausalLM.__init__(self, vllm_config=vllm_config, prefix=prefix)
    if type(self.model) is not VariantInner:
        raise RuntimeError(
            f"specbench head variants: EagleDeepseekV3ForCausalLM built {type(self.model).__name__}, "
            "not the variant class; this vLLM's EAGLE head constructs its inner model differently"
        )


# The one class the plugin registers for EagleDeepSeekMTPModel, whatever the variant.
VARIANT_CLASS = type(
    "EagleDeepseekV3SpecbenchVariants",
    (deepseek_eagle.EagleDeepseekV3ForCausalLM,),
    {"__init__": _outer_init, "__module__": __name__},
)


def variant_modules(model) -> list:
    """The modules of a draft ``model`` that hold variant buffers (the inner model)."""
    return [m for m in model.modules() if select.has_variant(m)]


def verify_wrapped_classes(vllm_version: str) -> None:
    """Raise RuntimeError naming the vLLM version and what is missing if the head is not as expected."""
    other = unchecked_source("eagle", deepseek_eagle.__file__, vllm_version)
    if other:
        raise RuntimeError(
            f"specbench head-variant plugin refuses: {other}; use the shipped values "
            "(output_norm on, pos0_mask off) or one of those vLLM releases"
        )
    problems = []
    outer = getattr(deepseek_eagle, "EagleDeepseekV3ForCausalLM", None)
    if outer is None:
        problems.append("deepseek_eagle.EagleDeepseekV3ForCausalLM")
    if not inspect.isclass(_BASE_INNER):
        problems.append("deepseek_eagle.DeepseekV2Model")
    else:
        params = list(inspect.signature(_BASE_INNER.forward).parameters)
        if params != FORWARD_PARAMS:
            problems.append(f"DeepseekV2Model.forward{tuple(FORWARD_PARAMS[1:])} (found {tuple(params[1:])})")
        # Its __init__ is wrapped by support_torch_compile, so read the class source instead.
        class_src = inspect.getsource(_BASE_INNER)
        problems += [f"DeepseekV2Model.{a}" for a in INNER_ATTRS if f"self.{a} =" not in class_src]
    if outer is not None and "DeepseekV2Model(" not in inspect.getsource(outer.__init__):
        problems.append("EagleDeepseekV3ForCausalLM.__init__ building DeepseekV2Model(...)")
    if problems:
        raise RuntimeError(
            f"specbench output-norm plugin cannot wrap vLLM {vllm_version}: missing {', '.join(problems)}; "
            "use the shipped values (output_norm on, pos0_mask off) or a vLLM whose deepseek_eagle.py matches 0.32"
        )

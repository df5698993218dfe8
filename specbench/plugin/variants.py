"""Head variants of vLLM's DeepSeek-V3 EAGLE head (imported only inside vLLM processes).

vLLM 0.32's ``deepseek_eagle.DeepseekV2Model.forward`` ends with ``self.norm(hidden_states, residual)``,
an RMSNorm fused with the residual add, which returns ``(norm(sum), sum)``; it hands back
``(norm, norm)``: the first for logits, the second carried to the next draft step. It does not mask
position 0. Two switches, composable:

* output norm: ``off`` -> ``(sum, sum)``: no final norm at all; ``logits-only`` -> ``(norm, sum)``:
  norm for logits only, the un-normed sum carried (what earlier vLLM's ``deepseek_mtp.py``
  carried; vLLM 0.32's MTP layer carries the post-norm state, as ``on`` does here).
* pos0 mask: ``on`` -> zero the input embedding at position 0 before ``enorm``, exactly as vLLM
  0.32's ``deepseek_mtp.py`` does (``torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)``).

``("on", False)`` re-implements the shipped forward: registered only as the control
(``SPECBENCH_HEAD_CONTROL=1``), which must count exactly as shipped vLLM does. The MTP layer's
variants are in :mod:`specbench.plugin.mtp_variants`.

The inner model must be *constructed* as the variant class: vLLM's compile wrapper captures
``forward`` when the module is built, so swapping classes or methods afterwards would not take.
"""

from __future__ import annotations

import inspect
import logging
import threading

import torch

from vllm.model_executor.models import deepseek_eagle

from specbench.plugin.attest import stamp
from specbench.plugin.switches import unchecked_source

# A child of vLLM's logger, so the line goes through the handler vLLM installs in every process.
logger = logging.getLogger("vllm.specbench_plugin")

INNER_ATTRS = ("embed_tokens", "enorm", "hnorm", "fc", "layers", "norm")
FORWARD_PARAMS = ["self", "input_ids", "positions", "hidden_states"]
# Returned (for logits, carried) for the fused norm's outputs ``normed`` and ``summed``.
VARIANT_OUTPUTS = {"on": ("norm", "norm"), "off": ("sum", "sum"), "logits-only": ("norm", "sum")}

_BASE_INNER = deepseek_eagle.DeepseekV2Model
_construct_lock = threading.Lock()


def _forward_for(variant: str, pos0_mask: bool):
    for_logits, carried = VARIANT_OUTPUTS[variant]

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, hidden_states: torch.Tensor):
        embeds = self.embed_tokens(input_ids)
        if pos0_mask:  # deepseek_mtp.py's mask, verbatim
            embeds = torch.where(positions.unsqueeze(-1) == 0, 0, embeds)
        inputs = torch.cat([self.enorm(embeds), self.hnorm(hidden_states)], dim=-1)
        hidden_states = self.fc(inputs)
        residual = None
        for layer in self.layers:
            hidden_states, residual = layer(positions, hidden_states, residual)
        normed, summed = self.norm(hidden_states, residual)
        picked = {"norm": normed, "sum": summed}
        return picked[for_logits], picked[carried]

    return stamp(forward, variant, pos0_mask)


def class_suffix(variant: str, pos0_mask: bool) -> str:
    return "OutputNorm" + variant.title().replace("-", "") + ("Pos0Mask" if pos0_mask else "")


def _make_inner(variant: str, pos0_mask: bool) -> type:
    mask = "on" if pos0_mask else "off"

    def __init__(self, *args, **kwargs):
        _BASE_INNER.__init__(self, *args, **kwargs)
        missing = [a for a in INNER_ATTRS if not hasattr(self, a)]
        if missing:
            raise RuntimeError(
                f"specbench output_norm '{variant}': vLLM's deepseek_eagle.DeepseekV2Model has no {missing}; "
                "this vLLM's EAGLE head differs from the one the plugin was written for (vLLM 0.32)"
            )
        logger.info("specbench output_norm variant '%s' loaded (pos0_mask %s): %s", variant, mask,
                    type(self).__qualname__)

    name = "DeepseekV2Model" + class_suffix(variant, pos0_mask)
    namespace = {"__init__": __init__, "forward": _forward_for(variant, pos0_mask), "__module__": __name__}
    return type(name, (_BASE_INNER,), namespace)


def _make_outer(variant: str, pos0_mask: bool, inner: type) -> type:
    def __init__(self, *, vllm_config, prefix: str = ""):
        # EagleDeepseekV3ForCausalLM.__init__ builds ``deepseek_eagle.DeepseekV2Model(...)`` by module
        # global; pointing that name at the variant while it runs keeps vLLM's own constructor (no
        # copy of it here) and builds the inner model once, so attention layers register once.
        with _construct_lock:
            deepseek_eagle.DeepseekV2Model = inner
            try:
                deepseek_eagle.EagleDeepseekV3ForCausalLM.__init__(self, vllm_config=vllm_config, prefix=prefix)
            finally:
                deepseek_eagle.DeepseekV2Model = _BASE_INNER
        if type(self.model) is not inner:
            raise RuntimeError(
                f"specbench output_norm '{variant}': EagleDeepseekV3ForCausalLM built {type(self.model).__name__}, "
                "not the variant; this vLLM's EAGLE head constructs its inner model differently"
            )

    name = "EagleDeepseekV3" + class_suffix(variant, pos0_mask)
    return type(name, (deepseek_eagle.EagleDeepseekV3ForCausalLM,), {"__init__": __init__, "__module__": __name__})


def verify_wrapped_classes(vllm_version: str) -> None:
    """Raise RuntimeError naming the vLLM version and what is missing if the head is not as expected."""
    other = unchecked_source("eagle", deepseek_eagle.__file__, vllm_version)
    if other:
        raise RuntimeError(f"specbench head-variant plugin refuses: {other}; use the shipped values "
                           "(output_norm on, pos0_mask off) or one of those vLLM releases")
    problems = []
    outer = getattr(deepseek_eagle, "EagleDeepseekV3ForCausalLM", None)
    if outer is None:
        problems.append("deepseek_eagle.EagleDeepseekV3ForCausalLM")
    if not isinstance(_BASE_INNER, type):
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


# (output_norm, pos0_mask) -> model class. ("on", False) is vLLM as shipped: the plugin registers it
# only as the control (SPECBENCH_HEAD_CONTROL=1), to show the re-implementation counts as vLLM does.
VARIANT_CLASSES = {
    (v, m): _make_outer(v, m, _make_inner(v, m)) for v in VARIANT_OUTPUTS for m in (False, True)
}

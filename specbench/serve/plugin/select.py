"""A head variant as data: three 0-dim bool buffers on the module, selected with ``torch.where``.

Why data and not code: vLLM compiles the draft model (Dynamo + Inductor) and, on GPUs, captures
CUDA graphs of it. A Python branch on the variant is resolved while tracing, so the graph keeps the
variant it was traced with and a later switch changes nothing. Values held in the module instead
are inputs of the graph: torch 2.5+ always inlines built-in nn.Modules (``inline_inbuilt_nn_modules``
is always True in the torch vLLM 0.32 ships with), which lifts every parameter and buffer into a
graph input read from the tensor's memory on each call, and a CUDA graph reads the same address on
each replay. A switch is then an in-place write (``fill_``) into those buffers: no re-trace, no
re-capture. ``torch.where`` selects exactly one operand per element, so each variant computes bit
for bit what its Python-branch forward computed (no arithmetic blending such as ``a*w + b*(1-w)``,
which would round differently).

The buffers are non-persistent: they are not in the state dict, so loading weights never touches
them and a checkpoint never carries them. Pure torch (no vLLM import): tests/serve/plugin/test_select.py
runs it under ``torch.compile`` on CPU.
"""

from __future__ import annotations

from typing import cast

import torch

# output_norm -> (logits from the normed state, normed state carried to the next draft step).
NORM_FLAGS = {"on": (True, True), "off": (False, False), "logits-only": (True, False)}
BUFFERS = ("specbench_logits_normed", "specbench_carry_normed", "specbench_pos0_mask")


def add_variant_buffers(module: torch.nn.Module, output_norm: str, pos0_mask: bool, device=None) -> None:
    """Register the three buffers on ``module`` (on ``device``: where its weights live)."""
    logits, carry = _flags(output_norm)
    for name, value in zip(BUFFERS, (logits, carry, bool(pos0_mask))):
        module.register_buffer(name, torch.tensor(value, dtype=torch.bool, device=device), persistent=False)


def init_variant_module(
    module: torch.nn.Module, required: tuple[str, ...], where: str, variant: tuple[str, bool], log
) -> None:
    """After vLLM's own ``__init__`` of a head's module: check it has what the variant forward reads
    (RuntimeError naming ``where`` otherwise), add the variant buffers set to ``variant``, and log
    the load line (one wording for both heads, so a log check reads them alike)."""
    missing = [a for a in required if not hasattr(module, a)]
    if missing:
        raise RuntimeError(
            f"specbench head variants: vLLM's {where} has no {missing}; this vLLM's head differs from "
            "the one the plugin was written for (vLLM 0.32)"
        )
    norm, mask = variant
    add_variant_buffers(module, norm, mask, device=weights_device(module))
    log.info(
        "specbench output_norm variant '%s' loaded (pos0_mask %s): %s",
        norm,
        "on" if mask else "off",
        type(module).__qualname__,
    )


def weights_device(module: torch.nn.Module):
    """The device ``module`` computes on (None: it has no weights), for its buffers to sit beside
    them: the one accelerator its weights are on, even where some weights stay in CPU memory (vLLM's
    --cpu-offload-gb keeps them there and computes on the GPU), else the CPU. A buffer on the CPU in
    a GPU module would be a constant baked into a captured CUDA graph, deaf to switches. Weights on
    two accelerators: RuntimeError (one buffer cannot sit beside both)."""
    devices = {p.device for p in module.parameters()}
    if not devices:
        return None
    accelerators = {d for d in devices if d.type != "cpu"}
    if len(accelerators) > 1:
        raise RuntimeError(
            f"specbench head variants: {type(module).__qualname__}'s weights are on {sorted(map(str, accelerators))}; "
            "the variant buffers need the one device the head computes on"
        )
    return next(iter(accelerators)) if accelerators else torch.device("cpu")


def has_variant(module: torch.nn.Module) -> bool:
    return all(isinstance(getattr(module, n, None), torch.Tensor) for n in BUFFERS)


def set_variant(module: torch.nn.Module, output_norm: str, pos0_mask: bool) -> None:
    """Switch ``module`` in place (``fill_``: same tensors, same addresses, so compiled graphs and
    captured CUDA graphs read the new values). ValueError for an unknown ``output_norm``, before
    anything is written."""
    values = (*_flags(output_norm), bool(pos0_mask))
    with torch.no_grad():
        for name, value in zip(BUFFERS, values):
            getattr(module, name).fill_(value)


def read_variant(module: torch.nn.Module) -> tuple[str | None, bool]:
    """(output_norm, pos0_mask) read from the buffers themselves (output_norm None: a combination
    no variant has)."""
    logits, carry, mask = (bool(getattr(module, n).item()) for n in BUFFERS)
    norm = next((k for k, v in NORM_FLAGS.items() if v == (logits, carry)), None)
    return norm, mask


def mask_pos0(module: torch.nn.Module, embeds: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """vLLM 0.32 deepseek_mtp.py's mask (zero the input embedding at position 0), applied only
    while the module's mask buffer is set."""
    return torch.where((positions.unsqueeze(-1) == 0) & cast(torch.Tensor, module.specbench_pos0_mask), 0, embeds)


def for_logits(module: torch.nn.Module, normed: torch.Tensor, summed: torch.Tensor) -> torch.Tensor:
    return torch.where(cast(torch.Tensor, module.specbench_logits_normed), normed, summed)


def carried(module: torch.nn.Module, normed: torch.Tensor, summed: torch.Tensor) -> torch.Tensor:
    return torch.where(cast(torch.Tensor, module.specbench_carry_normed), normed, summed)


def _flags(output_norm: str) -> tuple[bool, bool]:
    try:
        return NORM_FLAGS[output_norm]
    except KeyError:
        raise ValueError(f"unknown output_norm {output_norm!r}; known: {', '.join(NORM_FLAGS)}") from None

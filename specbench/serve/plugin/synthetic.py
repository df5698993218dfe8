"""Synthetic acceptance on vLLM-CPU: the two rejection kernels' synthetic mode, where vLLM's CPU build lacks it.

vLLM's ``rejection_sample_method: synthetic`` accepts position i's draft token with a configured
conditional probability instead of comparing it with the target (a server that measures how a
given acceptance profile performs). On GPU, the Triton kernels of ``vllm/v1/sample/rejection_sampler.py``
do it; vLLM-CPU 0.32 swaps those kernels for C++ ones (``vllm/platforms/cpu.py``
``register_triton_kernel_overrides``, from ``vllm/utils/cpu_triton_utils.py``) whose wrappers
``assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"``: the
server dies at its first request.

With ``SPECBENCH_SYNTHETIC_KERNEL=1`` (specbench sets it for cells whose speculative config asks
for ``synthetic``) the plugin asks each of those two wrappers whether it refuses synthetic mode
(one call on a one-token input: the assertion path, not a version check) and replaces only the
refusing ones, before the worker registers them (vLLM loads general plugins first, then the
platform's kernel overrides, in ``WorkerWrapperBase.init_worker``). The replacement runs the
Triton kernels' synthetic rule, per request, in order:

* greedy kernel (``rejection_greedy_sample_kernel``, requests with ``is_greedy``): position ``pos``
  is accepted iff ``uniform_probs[start + pos] < rate[pos]`` and the draft id is ``>= 0`` (-1 pads);
  the emitted token is the draft's when accepted, else the target's argmax, and the step stops;
* random kernel (``rejection_random_sample_kernel``, the other requests): a draft id ``< 0`` is
  rejected, else accepted iff ``uniform_probs[start + pos] < rate[pos]``; a rejected position emits
  the recovered token;
* every position accepted: the bonus token at ``num_draft_tokens``.

``rate`` is vLLM's conditional rate (``unconditional_to_conditional_rates``: ``p_i / p_{i-1}``),
float32 as vLLM holds it, compared with float64 uniforms as Triton promotes it. Without synthetic
mode the call goes to vLLM's own CPU kernel unchanged. The first synthetic call in a process logs
one line, and the worker's attestation says which kernel is registered (``rejection_kernel``).
Torch and vLLM are imported lazily: this module is also read by specbench outside vLLM.
"""

from __future__ import annotations

import inspect
import logging
import os
from typing import Any, Callable

SYNTHETIC_VAR = "SPECBENCH_SYNTHETIC_KERNEL"
KERNELS = {  # vLLM's kernel (the dispatcher's name) -> the CPU wrapper in vllm/utils/cpu_triton_utils.py
    "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel": "_rejection_greedy_sample_kernel_impl",
    "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel": "_rejection_random_sample_kernel_impl",
}
PLUGIN_KERNEL = "specbench-cpu"
LOG_LINE = "specbench synthetic: the plugin supplied the CPU synthetic rejection kernel (%s)"
REFUSAL = "Synthetic acceptance not supported"

logger = logging.getLogger("vllm.specbench_plugin")
_logged: set[str] = set()


def greedy_rule(
    out: list[list[int]],
    cu: list[int],
    draft: list[int],
    target_argmax: list[int],
    bonus: list[int],
    is_greedy: list[bool] | None,
    uniform: list[float],
    rates: list[float],
) -> None:
    """The greedy kernel's synthetic mode on plain lists (``out``: [batch][max_spec_len + 1], written in place)."""
    for req, end in enumerate(cu):
        if is_greedy is not None and not is_greedy[req]:
            continue
        start = cu[req - 1] if req else 0
        rejected = False
        for pos in range(end - start):
            d = draft[start + pos]
            accepted = uniform[start + pos] < rates[pos] and d >= 0
            out[req][pos] = d if accepted else target_argmax[start + pos]
            if not accepted:
                rejected = True
                break
        if not rejected:
            out[req][end - start] = bonus[req]


def random_rule(
    out: list[list[int]],
    cu: list[int],
    draft: list[int],
    bonus: list[int],
    recovered: list[int],
    uniform: list[float],
    is_greedy: list[bool],
    rates: list[float],
) -> None:
    """The random kernel's synthetic mode on plain lists (requests with ``is_greedy`` false)."""
    for req, end in enumerate(cu):
        if is_greedy[req]:
            continue
        start = cu[req - 1] if req else 0
        rejected = False
        for pos in range(end - start):
            d = draft[start + pos]
            accepted = d >= 0 and uniform[start + pos] < rates[pos]
            out[req][pos] = d if accepted else recovered[start + pos]
            if not accepted:
                rejected = True
                break
        if not rejected:
            out[req][end - start] = bonus[req]


def _flat(t: Any) -> list:
    return t.reshape(-1).tolist()


def _rates(rates: Any) -> list[float]:
    # float32 as vLLM holds them, widened exactly to float64 (Triton's promotion in `uniform < rate`)
    import torch  # lazy: only inside a vLLM worker

    return rates.to(torch.float64).tolist()


def _write(output_token_ids: Any, rows: list[list[int]]) -> None:
    import torch  # lazy: only inside a vLLM worker

    output_token_ids.copy_(torch.tensor(rows, dtype=output_token_ids.dtype))


def greedy_kernel(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (vLLM's CPU greedy wrapper) with synthetic mode supplied."""

    def rule(a: dict[str, Any], rows: list[list[int]]) -> None:
        is_greedy = a.get("is_greedy")
        greedy_rule(
            rows,
            _flat(a["cu_num_draft_tokens"]),
            _flat(a["draft_token_ids"]),
            _flat(a["target_argmax"]),
            _flat(a["bonus_token_ids"]),
            None if is_greedy is None else _flat(is_greedy),
            _flat(a["uniform_probs"]),
            _rates(a["synthetic_conditional_rates"]),
        )

    return _supplied(original, "greedy", rule)


def random_kernel(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (vLLM's CPU random-sampling wrapper) with synthetic mode supplied."""

    def rule(a: dict[str, Any], rows: list[list[int]]) -> None:
        random_rule(
            rows,
            _flat(a["cu_num_draft_tokens"]),
            _flat(a["draft_token_ids"]),
            _flat(a["bonus_token_ids"]),
            _flat(a["recovered_token_ids"]),
            _flat(a["uniform_probs"]),
            _flat(a["is_greedy"]),
            _rates(a["synthetic_conditional_rates"]),
        )

    return _supplied(original, "random", rule)


def _supplied(
    original: Callable[..., Any], which: str, rule: Callable[[dict[str, Any], list[list[int]]], None]
) -> Callable[..., Any]:
    """``original`` where it is not in synthetic mode; in it, ``rule`` over the output rows (bound by
    ``original``'s own signature) written back in place, as vLLM's wrappers do."""
    sig = inspect.signature(original)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        a = sig.bind(*args, **kwargs).arguments
        if not a.get("SYNTHETIC_MODE"):
            return original(*args, **kwargs)
        _log_once(which)
        out = a["output_token_ids"]
        rows = out.tolist()
        rule(a, rows)
        _write(out, rows)
        return None

    kernel.__name__ = f"specbench_synthetic_{which}_kernel"
    setattr(kernel, "_specbench_synthetic", True)  # noqa: B010 - a mark the attestation reads back
    return kernel


def _log_once(which: str) -> None:
    if not _logged:  # one line per process: the first synthetic step, greedy or random
        _logged.add(which)
        logger.info(LOG_LINE, f"first used for {which} sampling; vLLM's CPU kernel refuses synthetic mode")


def refuses_synthetic(impl: Callable[..., Any], random: bool) -> bool:
    """Whether vLLM's CPU wrapper ``impl`` stops on synthetic mode (its assertion), asked with a
    one-request, one-token input; any other outcome (it ran, or failed otherwise) is not a refusal."""
    import torch  # lazy: only inside a vLLM process

    out = torch.full((1, 2), -1, dtype=torch.int32)
    i32, i64 = torch.tensor([1], dtype=torch.int32), torch.tensor([[0]], dtype=torch.int64)
    u, rates = torch.tensor([0.5], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float32)
    try:
        if random:
            probs = torch.full((1, 2), 0.5, dtype=torch.float32)
            greedy = torch.tensor([False])
            impl(out, i32, i32 * 0, None, probs, i64, i32 * 0, u, greedy, 1, 2, rates, True, True)
        else:
            impl(out, i32, i32 * 0, i64.reshape(1), i64, None, 1, u, rates, True)
    except AssertionError as exc:
        return REFUSAL in str(exc)
    except Exception:  # noqa: BLE001 - not the refusal: vLLM's kernel is left as it is
        return False
    return False


def install() -> list[str]:
    """Replace each of vLLM-CPU's rejection wrappers that refuses synthetic mode (see the module
    docstring); the names replaced (empty: none needed, or not a CPU build with these wrappers)."""
    if os.environ.get(SYNTHETIC_VAR, "").strip() != "1":
        return []
    try:
        from vllm.triton_utils import HAS_TRITON
        from vllm.utils import cpu_triton_utils as cpu_tl
    except ImportError:
        return []
    if HAS_TRITON:
        return []  # vLLM runs the Triton kernels themselves, synthetic mode included
    done = []
    for name, attr in KERNELS.items():
        impl = getattr(cpu_tl, attr, None)
        if impl is None or getattr(impl, "_specbench_synthetic", False):
            continue
        random = "random" in attr
        if refuses_synthetic(impl, random):
            setattr(cpu_tl, attr, (random_kernel if random else greedy_kernel)(impl))
            done.append(name)
    _reregister(cpu_tl, done)
    return done


def _reregister(cpu_tl: Any, names: list[str]) -> None:
    # the platform registers its overrides after the plugins load; where it already did (a process
    # that loads plugins again), register the replacements over them
    from vllm.triton_utils import dispatcher

    again = {n: getattr(cpu_tl, KERNELS[n]) for n in names if n in getattr(dispatcher, "_registry", {})}
    if again:
        dispatcher.register_kernels(again)


def registered_kernel() -> str | None:
    """Whose synthetic kernel this process runs: ``specbench-cpu`` when the plugin's is registered
    for vLLM's greedy kernel, ``vllm`` when another is, None when no override is registered."""
    try:
        from vllm.triton_utils import dispatcher
    except ImportError:
        return None
    held = getattr(dispatcher, "_registry", {}).get(next(iter(KERNELS)))
    if held is None:
        return None
    return PLUGIN_KERNEL if getattr(held[1], "_specbench_synthetic", False) else "vllm"

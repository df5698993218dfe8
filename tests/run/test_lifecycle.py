"""run/lifecycle.py: a cell's failure branches are written once, so a cell that fails the same way
fails with the same record whichever executor ran it (its own server: LocalExecutor; a server
shared with a load-axis sibling: GroupedExecutor.run_group).

The server is a FAKE (tests/run/standin_dies_on_load.py): a real vLLM cannot be made to die at a
chosen request on demand, nor start in a second; tests/run/test_faults_vllm.py kills a real one
mid-run through one executor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.cli.exits import run_exit
from specbench.config import parse_study
from specbench.errors import EXIT_FAILED_CELLS
from specbench.records.cell import Spec
from specbench.records.files import CellRecord, Manifest, load
from specbench.results import store
from specbench.run.cells import Cell
from specbench.run.display import QuietDisplay
from specbench.run.groups import GroupedExecutor, group_cells
from specbench.run.runner import RunPlan, execute
from specbench.serve.server import VLLMServer

HERE = Path(__file__).resolve().parent


def _study(share: bool):
    return parse_study(
        {
            "name": "lifecycle",
            "serve": {"model": "owner/m", "log_stats_interval_s": 1, "startup_timeout_s": 60, "share_servers": share},
            "matrix": {"load:concurrency": [1, 2]},
            "load": {"num_requests": 2, "warmup_requests": 0, "max_tokens": 4, "timeout_s": 10},
            "baseline": False,
        },
        "lifecycle.yaml",
    )


def _cells(spec: Spec | None = None) -> list[Cell]:
    env = {"PYTHONPATH": str(HERE)}  # where python -m finds the stand-in
    return [
        Cell(
            cell_id=f"concurrency-{c}__r0",
            axes={"load:concurrency": c},
            repeat=0,
            is_baseline=False,
            args=["owner/m"],
            env=env,
            load={"concurrency": c},
            model="m",
            spec=spec or Spec(num_speculative_tokens=3),
        )
        for c in (1, 2)
    ]


def _run(run_dir: Path, cells: list[Cell], share: bool) -> list[CellRecord]:
    """The cells through runner.execute (as `specbench run` runs them) with a server per cell
    (share False: LocalExecutor.run_cell) or one shared server (GroupedExecutor.run_group); the
    cells' saved cell.json records."""
    study = _study(share)
    assert len(group_cells(cells, share=share)) == (1 if share else 2)
    manifest = Manifest(run_id="r", axes=list(study.matrix), cells=[c.cell_id for c in cells], status="running")
    store.write_manifest(run_dir, manifest)
    plan = RunPlan(study=study, cells=cells, run_dir=run_dir, run_id="r", manifest=manifest)
    assert run_exit(execute(plan, QuietDisplay(), GroupedExecutor())) == EXIT_FAILED_CELLS
    return [load(CellRecord, store.cell_dir(run_dir, c.cell_id) / store.CELL_JSON) for c in cells]


def _both(tmp_path: Path, monkeypatch, spec: dict | None = None) -> tuple[list[CellRecord], list[CellRecord]]:
    monkeypatch.setattr(VLLMServer, "entry_module", "standin_dies_on_load")
    cells = _cells(spec)
    return _run(tmp_path / "alone", cells, share=False), _run(tmp_path / "shared", cells, share=True)


@pytest.mark.heavy
def test_a_server_dying_under_load_fails_the_cell_alike_in_both_executors(tmp_path, monkeypatch):
    (alone, _), (first, second) = _both(tmp_path, monkeypatch)
    for rec in (alone, first):
        assert (rec.status, rec.reason) == ("failed", "vLLM server died during the load")
        assert rec.exit_status == 7  # the server's own exit status, not the stop's
        assert "standin: engine died" in rec.log_tail
    assert first.server_group.index == 0 and alone.server_group is None
    # the shared server is gone: the next cell fails at once, naming the cell it died in
    assert second.status == "failed"
    assert second.reason == f"the group's server died during cell {first.cell_id}"


@pytest.mark.heavy
def test_an_attestation_mismatch_fails_the_cell_alike_in_both_executors(tmp_path, monkeypatch):
    # The cells claim MLA off; the server says it runs an MLA backend. Nothing is measured.
    (alone, _), (first, second) = _both(tmp_path, monkeypatch, spec=Spec(mla=False, num_speculative_tokens=3))
    for rec in (alone, first, second):
        assert (rec.status, rec.reason) == ("failed", "attestation: mla: asked for off, vLLM ran on")
        assert rec.attested.mla is True and rec.timings.load_s is None
    assert not (tmp_path / "alone" / alone.cell_id / "requests.jsonl").exists()
    # the shared server was alive when each cell ended: no exit status; the own server's is its stop's
    assert first.exit_status is None and second.exit_status is None and alone.exit_status is not None

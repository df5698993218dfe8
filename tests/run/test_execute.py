"""specbench/run/runner.execute: save after every cell, Ctrl-C keeps finished cells, exit codes.

The executor here is a stand-in that returns canned cell results without starting vLLM: what is
tested is the orchestration around it (files on disk after each cell, manifest states), which a
real server cannot be made to exercise on demand (an interrupt at an exact cell). The real
executor is exercised by test_default_study.py and test_runner.py.
"""

from __future__ import annotations

from pathlib import Path

import factories
import pytest

import specbench.io
from specbench.cli.exits import run_exit
from specbench.errors import EXIT_FAILED_CELLS, EXIT_OK
from specbench.results import store
from specbench.results import store as store_mod
from specbench.run.display import QuietDisplay
from specbench.run.runner import execute


def _plan(tmp_path):
    return factories.plan(tmp_path, factories.study(draft="org/draft", baseline=True), status="running")


def _acc(d, a):
    return {
        "prometheus": {
            "counts": {"num_drafts": d, "draft_tokens": 3 * d, "accepted_tokens": a, "accepted_per_position": None}
        },
        "derived": {"mean_acceptance_length": 1 + a / d, "per_position": [0.7]},
    }


class Scripted:
    def __init__(self, outcomes, run_dir):
        self.outcomes, self.run_dir, self.seen = list(outcomes), run_dir, []

    def run_cell(self, cell, ctx):
        # Every earlier cell must already be on disk and in cells.csv (save as you go).
        for prev in self.seen:
            assert (self.run_dir / prev / "cell.json").exists()
            assert prev in (self.run_dir / "cells.csv").read_text()
        self.seen.append(cell.cell_id)
        what = self.outcomes.pop(0)
        if what == "interrupt":
            raise KeyboardInterrupt
        rec = {
            "cell_id": cell.cell_id,
            "axes": cell.axes,
            "repeat": 0,
            "is_baseline": cell.is_baseline,
            "status": what,
            "reason": None if what == "done" else "server died",
        }
        return rec, (_acc(100, 150) if what == "done" else None)


def test_all_done_exit_0(tmp_path):
    plan = _plan(tmp_path)
    # 2 spec cells + one baseline per MLA value
    assert run_exit(execute(plan, QuietDisplay(), Scripted(["done"] * 4, plan.run_dir))) == EXIT_OK
    run = store.load_run(plan.run_dir)
    assert run.manifest.status == "done" and run.manifest.ended_at
    assert len(run.cells_frame()) == 4


def test_some_failed_exit_3_and_resume_skips_done(tmp_path):
    plan = _plan(tmp_path)
    assert (
        run_exit(execute(plan, QuietDisplay(), Scripted(["done", "failed", "done", "done"], plan.run_dir)))
        == EXIT_FAILED_CELLS
    )
    assert store.load_run(plan.run_dir).manifest.status == "some_failed"
    plan.skip = {cid for cid, c in store.load_run(plan.run_dir).cells.items() if c.status == "done"}
    again = Scripted(["done"], plan.run_dir)
    again.seen = sorted(plan.skip)
    assert run_exit(execute(plan, QuietDisplay(), again)) == EXIT_OK
    assert again.seen[-1] == "mla-off__r0"  # only the failed cell ran


def test_interrupt_keeps_finished_cells(tmp_path):
    plan = _plan(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        execute(plan, QuietDisplay(), Scripted(["done", "interrupt"], plan.run_dir))
    run = store.load_run(plan.run_dir)
    assert run.manifest.status == "interrupted"
    assert list(run.cells) == ["mla-on__r0"]
    assert run.cells_frame().cell_id.tolist() == ["mla-on__r0"]


@pytest.mark.heavy
def test_saving_after_each_cell_reads_no_earlier_cell(tmp_path, monkeypatch):
    """cells.csv is rewritten after every cell from rows kept in memory (store.Tables): the reads of
    cell.json / summary.json grow with the cells, not with their square (each used to re-read all)."""

    study = factories.study(
        matrix={"mla": ["on", "off"], "env:X": ["a", "b", "c", "d", "e"]}, draft="org/draft", baseline=True
    )
    plan = factories.plan(tmp_path, study, status="running")
    cells, run_dir, manifest = plan.cells, plan.run_dir, plan.manifest
    reads: dict[str, int] = {}
    real_load_json, real_read_text = specbench.io.load_json, store_mod.read_text

    def load_json(path, **kw):
        reads[Path(path).name] = reads.get(Path(path).name, 0) + 1
        return real_load_json(path, **kw)

    def read_text(path, *a, **kw):
        reads[Path(path).name] = reads.get(Path(path).name, 0) + 1
        return real_read_text(path, *a, **kw)

    monkeypatch.setattr(specbench.io, "load_json", load_json)
    monkeypatch.setattr(store_mod, "read_text", read_text)
    for cid in manifest.cells:  # every cell has a summary.json, as a real load writes one
        (run_dir / cid).mkdir(parents=True)
        (run_dir / cid / "summary.json").write_text('{"results_number_input_tokens_mean": 1}')
    n = len(cells)
    assert run_exit(execute(plan, QuietDisplay(), Scripted(["done"] * n, run_dir))) == EXIT_OK
    # the end of the run reads each cell.json once; each summary.json is read once, when its cell is saved
    assert n == 20 and reads.get("cell.json", 0) <= 2 * n and reads.get("summary.json", 0) <= 2 * n, reads
    frame = store.load_run(run_dir).cells_frame()  # and the tables hold every cell, in the plan's order
    assert list(frame["cell_id"]) == [c.cell_id for c in cells]
    # byte for byte what the tables are when built from the saved files, as they used to be
    run = store.load_run(run_dir)
    again = tmp_path / "again"
    again.mkdir()
    store.write_tables(again, "r", list(study.matrix), [(c.record, c.acc, c.summary) for c in run.cells.values()])
    assert (again / "cells.csv").read_text() == (run_dir / "cells.csv").read_text()

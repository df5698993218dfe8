"""LocalExecutor's record of a server that dies at start-up, with the stand-in server
(tests/load/standin_vllm.py): a real vLLM cannot crash at start on demand, in under a second."""

from __future__ import annotations

from pathlib import Path

from specbench.config import load_config
from specbench.records.cell import Spec
from specbench.records.files import CellRecord, load
from specbench.run.cells import Cell
from specbench.run.display import QuietDisplay
from specbench.run.measure import wait_log_matches
from specbench.run.runner import LocalExecutor, RunContext
from specbench.serve.server import VLLMServer

ROOT = Path(__file__).resolve().parents[2]
STANDINS = ROOT / "tests" / "load"


def test_a_server_that_exits_at_start_is_recorded_with_its_status(tmp_path, monkeypatch):
    monkeypatch.setattr(VLLMServer, "entry_module", "standin_vllm")
    study = load_config(ROOT / "configs" / "default.yaml")
    cell = Cell(
        cell_id="c__r0",
        axes={"mla": "on"},
        repeat=0,
        is_baseline=False,
        args=["crash"],
        env={"PYTHONPATH": str(STANDINS)},
        spec=Spec(num_speculative_tokens=3),
        model="m",
    )
    ctx = RunContext(study=study, run_dir=tmp_path, prompts=[], display=QuietDisplay())
    record, acc = LocalExecutor().run_cell(cell, ctx)
    assert acc is None and record.status == "failed"
    # The server's own exit status (VLLMServer.exit_status), not a number parsed from a message.
    assert record.exit_status == 3 and record.reason.startswith("vLLM server exited with status 3")
    assert "fatal error, exiting 3" in record.log_tail
    assert record.argv[-2:] == ["--port", str(record.port)] and record.pid
    assert load(CellRecord, tmp_path / "c__r0" / "cell.json").dump() == {"schema_version": 1, **record.dump()}


class _Scrapes:
    """A server that has finished: its /metrics is the committed run's after-scrape."""

    def __init__(self, cell: Path):
        self.cell = cell

    def scrape_metrics(self) -> str:
        return (self.cell / "metrics_after.prom").read_text()

    def is_alive(self) -> bool:
        return True


def test_wait_log_matches_sums_the_printed_windows_to_the_metrics_diff():
    """The wait the runner does before each scrape, on a real cell's files (results/baselines)."""

    cell = ROOT / "results" / "baselines" / "cpu-default" / "mla-on__output_norm-on__r0"
    _, prom, windows, _, matched = wait_log_matches(_Scrapes(cell), cell / "server.log", 0, None, timeout_s=0.5)
    assert matched and len(windows) >= 2 and prom.num_drafts == sum(w.num_drafts for w in windows)
    # Windows after the last line are none: they cannot add up to the counts, and the wait gives up.
    lines = (cell / "server.log").read_text().count("\n")
    assert wait_log_matches(_Scrapes(cell), cell / "server.log", lines, None, timeout_s=0.3, poll_s=0.1)[4] is False

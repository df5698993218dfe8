"""When the probe says a shared server cannot switch its head, the group's cells get a server per
variant (run/groups.py ``GroupedExecutor._server_per_variant``), with the reason in the manifest,
each record and the display. No server here: the executor's own ``run_cell``/``run_group`` are
replaced by recorders (a real server that fails the probe costs three vLLM start-ups; the probe's
detection of a server without the worker extension is real in tests/serve/plugin/test_switch_vllm.py)."""

from __future__ import annotations

from specbench.config import parse_study
from specbench.records.files import Manifest
from specbench.run.cells import expand
from specbench.run.groups import SERVERS_DIR, GroupedExecutor, group_cells, head_variant
from specbench.run.runner import RunContext, _note_hosts, new_record


class Display:
    def __init__(self):
        self.lines = []

    def update(self, cell_id, state, **info):
        self.lines.append((cell_id, state))


class Recording(GroupedExecutor):
    """Records which cells would get a server of their own (run_cell) or share one (run_group)."""

    def __init__(self, study):
        self.study, self.servers = study, []

    def run_cell(self, cell, ctx):
        self.servers.append([cell.cell_id])
        return new_record(cell, self.study), None

    def run_group(self, group, ctx):
        self.servers.append([c.cell_id for c in group])
        for c in group:
            yield new_record(c, self.study), None


def _cells():
    serve = {"model": "org/m", "speculative": {"draft": "org/d"}, "per_request_metrics": "off"}
    study = parse_study(
        {
            "name": "t",
            "serve": serve,
            "baseline": False,
            "matrix": {"output_norm": ["on", "off"], "load:concurrency": [1, 2]},
        },
        "s.yaml",
    )
    (group,) = group_cells(expand(study), study.serve.host)  # one optimistic shared server
    return study, group


def test_a_server_that_cannot_switch_gives_each_variant_its_own_server(tmp_path):
    study, group = _cells()
    assert len({head_variant(c) for c in group}) == 2 and len(group) == 4
    (tmp_path / SERVERS_DIR / group[0].cell_id).mkdir(parents=True)
    (tmp_path / SERVERS_DIR / group[0].cell_id / "server.log").write_text("probed\n")
    display = Display()
    ctx = RunContext(study=study, run_dir=tmp_path, prompts=[], display=display)
    executor = Recording(study)
    reason = "worker 0: the draft model is EagleDeepseekV3ForCausalLM, not the plugin's variant class"
    records = [r for r, _ in executor._server_per_variant(group, ctx, reason)]

    # one server per variant, the load cells of a variant still sharing it; every cell ran once
    assert sorted(map(sorted, executor.servers)) == sorted(
        sorted(c.cell_id for c in group if head_variant(c) == v) for v in {head_variant(c) for c in group}
    )
    assert sorted(r.cell_id for r in records) == sorted(c.cell_id for c in group)
    assert all(r.server_group.head_switch_fallback == reason for r in records)
    # the probed server's log is kept apart from the per-variant servers' directories
    assert (tmp_path / SERVERS_DIR / f"{group[0].cell_id}.cannot-switch" / "server.log").read_text() == "probed\n"
    assert any(reason in state for _, state in display.lines)
    manifest = _note_hosts(Manifest(run_id="r", cells=[c.cell_id for c in group]), ctx)
    (note,) = manifest.head_switch_fallbacks
    assert note.reason == reason and note.cells == [c.cell_id for c in group]

"""The manifest a run writes keeps its keys in the order they were set (run/plan.py builds it, the
runner and ``run --gate`` add keys while the run goes): the order of the committed baselines'
manifest.json, and for the keys no baseline has, the order the run sets them in."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from specbench.cli.run_cmd import _announce
from specbench.records.cell import HeadSwitchFallback
from specbench.run.display import QuietDisplay
from specbench.run.plan import new_plan, resume_plan
from specbench.run.runner import execute

BASELINES = Path(__file__).resolve().parents[2] / "results" / "baselines"


class Remote:
    """Every cell done, on node ``node`` where one is given; the first cell also notes a shared
    server that could not switch its head (as run/groups.py does)."""

    def __init__(self, node: str | None = None, fallback: bool = False):
        self.node, self.fallback = node, fallback

    def run_cell(self, cell, ctx):
        if self.fallback:
            ctx.switch_fallbacks.append(HeadSwitchFallback(server="servers/x", cells=[cell.cell_id], reason="r"))
            self.fallback = False
        rec = {"cell_id": cell.cell_id, "axes": cell.axes, "repeat": 0, "status": "done", "node": self.node}
        return rec, None


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "s.yaml"
    study = {
        "name": "t",
        "serve": {"model": "org/m", "speculative": {"draft": "org/d"}, "per_request_metrics": "off"},
        "matrix": {"mla": ["on", "off"]},
        "load": {"num_requests": 4, "warmup_requests": 1},
    }
    cfg.write_text(yaml.safe_dump(study))
    return cfg


def _keys(path: Path) -> list[str]:
    return list(json.loads((path / "manifest.json").read_text()))


def test_a_fresh_run_writes_the_keys_of_a_committed_baseline_in_its_order(tmp_path):
    plan = new_plan(_config(tmp_path), tmp_path / "plain")
    assert execute(plan, QuietDisplay(), Remote()) == "done"
    assert _keys(plan.run_dir) == _keys(BASELINES / "cpu-speedup")


def test_a_gated_run_writes_overrides_and_gate_keys_where_the_committed_gate_rerun_has_them(tmp_path):
    plan = new_plan(_config(tmp_path), tmp_path / "gate", ("load.num_requests=3",))
    _announce(plan, True, ["# sized for 3 prompts"], {"baseline_run_id": "b", "prompts": 3, "of": 4})
    assert execute(plan, QuietDisplay(), Remote()) == "done"
    assert _keys(plan.run_dir) == _keys(BASELINES / "cpu-gate-rerun")


def test_keys_set_while_running_follow_in_the_order_the_run_sets_them(tmp_path):
    """cell_hosts and head_switch_fallbacks (a Ray run's, a shared server's) come after workloads,
    though the model declares them before gate_sizing and workloads."""
    plan = new_plan(_config(tmp_path), tmp_path / "ray")
    _announce(plan, True, ["# sized"], None)
    assert execute(plan, QuietDisplay(), Remote(node="n1", fallback=True)) == "done"
    base = _keys(BASELINES / "cpu-speedup")
    assert _keys(plan.run_dir) == [*base[:-1], "gate_sizing", "workloads", "cell_hosts", "head_switch_fallbacks"]


def test_a_resumed_baseline_keeps_its_keys_and_values_and_adds_resumed_at_last(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(BASELINES / "cpu-speedup", run_dir)
    before = json.loads((run_dir / "manifest.json").read_text())
    before["config_path"] = str(tmp_path / "moved-away.yaml")  # planned from the saved resolved_config
    (run_dir / "manifest.json").write_text(json.dumps(before, indent=2))
    shutil.rmtree(run_dir / before["cells"][0])
    plan = resume_plan(run_dir)
    assert execute(plan, QuietDisplay(), Remote()) == "done"
    after = json.loads((run_dir / "manifest.json").read_text())
    assert list(after) == [*before, "resumed_at"]
    kept = {k: v for k, v in after.items() if k not in ("ended_at", "workloads", "resumed_at")}
    assert kept == {k: v for k, v in before.items() if k not in ("ended_at", "workloads")}

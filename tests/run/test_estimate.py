"""``specbench run --dry-run``'s plan: servers (= cold starts), cells per server, requests and the
wall-time estimate (specbench/run/estimate.py, run/timings.py). No vLLM here.

The counts are read from the printed dry-run of the real configs and checked against what each
config's matrix says, worked out here from the YAML alone. The estimate is checked against start-ups
and load times that a run recorded through ``execute`` (the executor is a stand-in that hands back
records with chosen timings: a real server's start-up cannot be chosen).
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from pathlib import Path

import pytest
import yaml

from specbench.cli.exits import run_exit
from specbench.cli.main import run_cli
from specbench.records.cell import Spec
from specbench.records.files import CellRecord
from specbench.run import timings
from specbench.run.display import QuietDisplay
from specbench.run.groups import group_cells
from specbench.run.plan import new_plan
from specbench.run.runner import execute

ROOT = Path(__file__).resolve().parents[2]


def dry_run(config: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli(["run", str(config), "--dry-run"])
    return code, out.getvalue(), err.getvalue()


def printed_plan(text: str) -> dict:
    """The numbers the dry-run prints, read back as a user would."""
    head = re.search(
        r"^# \S+: (\d+) cells \((\d+) speculative, (\d+) baseline\) on (\d+) server\(s\) = "
        r"(\d+) cold start\(s\)",
        text,
        re.MULTILINE,
    )
    req = re.search(
        r"^# requests: ([\d,]+) = (\d+) cells x ([\d,]+) \+ (\d+) warm-up\(s\) x ([\d,]+)", text, re.MULTILINE
    )
    wall = re.search(r"^# wall time: (?:about )?(.+?) = start-ups (.+?) \+ load (.+?) \(", text, re.MULTILINE)
    rows = re.findall(
        r"^#\s+(\d+)\s+(\d+)\s+([\d,]+)\s+(\S+(?: s| min)?)\s+(\S+(?: s| min)?)\s+(\S+)$", text, re.MULTILINE
    )
    assert head and req and wall, text[:2000]

    def num(s: str) -> int:
        return int(s.replace(",", ""))

    return {
        "cells": int(head[1]),
        "spec": int(head[2]),
        "baselines": int(head[3]),
        "servers": int(head[4]),
        "cold_starts": int(head[5]),
        "requests": num(req[1]),
        "wall": wall[1],
        "startups": wall[2],
        "load": wall[3],
        "rows": [(int(r[1]), num(r[2]), r[3], r[4], r[5]) for r in rows],
    }


def _from_yaml(path: Path) -> dict:
    """Cells and servers from the config's own matrix: head-variant axes (output_norm, pos0_mask, or
    the environment variables they set) share a server, every other axis value (and each baseline)
    is a server of its own."""
    data = yaml.safe_load(path.read_text())
    matrix, load = data.get("matrix") or {}, data.get("load") or {}
    variant_axes = ("output_norm", "pos0_mask", "env:SPECBENCH_OUTPUT_NORM", "env:SPECBENCH_POS0_MASK")
    variants = math.prod(len(v) for a, v in matrix.items() if a in variant_axes)
    others = math.prod(len(v) for a, v in matrix.items() if a not in variant_axes)
    baselines = math.prod(len(v) for a, v in matrix.items() if a == "mla") if data.get("baseline") else 0
    spec = variants * others
    n, warm = load.get("num_requests", 20), load.get("warmup_requests", 2)
    return {
        "cells": spec + baselines,
        "spec": spec,
        "baselines": baselines,
        "servers": others + baselines,
        "switching": others if variants > 1 else 0,
        "fallback_extra": others * (variants - 1),
        "cells_per_server": sorted([variants] * others + [1] * baselines, reverse=True),
        "requests": (spec + baselines) * n + (others + baselines) * warm,
        "n": n,
        "warm": warm,
    }


@pytest.mark.parametrize(
    "name, servers",
    [
        ("deepseek-r1-eagle.yaml", 6),  # 2 MLA x {eagle, deepseek_mtp} + 2 baselines (was 26: one per cell)
        ("seed-questions.yaml", 3),  # one per method + the baseline, on the CPU twin (was 8)
        ("default.yaml", 4),  # one per MLA value + a baseline each, as before
        ("head_variants.yaml", 1),
        ("k_sweep.yaml", 4),  # k needs a new server: 3 + the baseline
    ],
)
def test_dry_run_counts_are_what_the_matrix_says(name, servers, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECBENCH_TIMINGS_FILE", str(tmp_path / "none.json"))  # nothing measured
    code, out, err = dry_run(ROOT / "configs" / name)
    assert code == 0, err
    got, want = printed_plan(out), _from_yaml(ROOT / "configs" / name)
    assert got["servers"] == got["cold_starts"] == want["servers"] == servers
    for key in ("cells", "spec", "baselines", "requests"):
        assert got[key] == want[key], key
    assert sorted((r[0] for r in got["rows"]), reverse=True) == want["cells_per_server"]
    assert sum(r[1] for r in got["rows"]) == got["requests"]
    assert got["wall"] == "unknown" and "never measured here: start-up of" in out
    if want["switching"]:  # the worst case if the start-up probe says no: a server per variant
        assert (
            f"#   {want['switching']} of them switch head variants in place; if a server's start-up probe says "
            f"it cannot, its variants get a server each (up to {want['fallback_extra']} more cold start(s))"
        ) in out
    else:
        assert "switch head variants in place" not in out
    assert out.count("\n[") == got["cells"]  # every cell's argv still follows


class Timed:
    """Stand-in executor: each cell 'ran' with a chosen start-up (on the first cell of a server) and
    load time, as the real executors record them in cell.json."""

    def __init__(self, groups, startup, per_request, n):
        self.first = {g[0].cell_id: i for i, g in enumerate(groups)}
        self.startup, self.per_request, self.n = startup, per_request, n

    def run_cell(self, cell, ctx):
        i = self.first.get(cell.cell_id)
        per = self.per_request[cell.is_baseline]
        return {
            "cell_id": cell.cell_id,
            "axes": cell.axes,
            "repeat": 0,
            "is_baseline": cell.is_baseline,
            "status": "done",
            "spec": cell.spec,
            "timings": {"startup_s": 0.0 if i is None else self.startup[i], "load_s": per * self.n},
        }, None


def test_wall_time_is_the_sum_of_what_earlier_runs_measured_here(monkeypatch, tmp_path):

    monkeypatch.setenv("SPECBENCH_TIMINGS_FILE", str(tmp_path / "timings.json"))
    cfg = tmp_path / "s.yaml"
    n, warm = 4, 2
    cfg.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "serve": {
                    "model": "org/m",
                    "speculative": {"draft": "org/d"},
                    "enforce_eager": True,
                    "per_request_metrics": "off",
                },
                "matrix": {"mla": ["on", "off"], "output_norm": ["on", "off"]},
                "baseline": True,
                "load": {"num_requests": n, "warmup_requests": warm},
            }
        )
    )
    code, out, _ = dry_run(cfg)
    assert code == 0 and printed_plan(out)["wall"] == "unknown"

    plan = new_plan(cfg, tmp_path / "results")
    groups = group_cells(plan.cells)
    startup, per = [11.0, 13.0, 7.0, 5.0], {False: 0.5, True: 0.25}
    assert run_exit(execute(plan, QuietDisplay(), Timed(groups, startup, per, n))) == 0

    got = printed_plan(dry_run(cfg)[1])
    # independently: each server's start-up + every request it sends (warm-up once) at its rate
    load = [per[g[0].is_baseline] * (n * len(g) + warm) for g in groups]
    assert [r[2] for r in got["rows"]] == [f"{s:.0f} s" for s in startup]
    assert [r[3] for r in got["rows"]] == [f"{x:.0f} s" for x in load]
    assert got["startups"] == f"{sum(startup):.0f} s" and got["load"] == f"{sum(load):.0f} s"
    assert got["wall"] == f"{sum(startup) + sum(load):.0f} s"


def test_a_failed_cell_records_nothing_and_other_settings_stay_unknown(monkeypatch, tmp_path):

    path = tmp_path / "timings.json"
    rec = CellRecord(
        cell_id="c",
        status="failed",
        spec={"method": "eagle", "compiled": True},
        timings={"startup_s": 9.0, "load_s": 3.0},
    )
    timings.note_cell("org/m", rec, 4, 64, 10, "r", path)
    assert not path.exists()
    rec = CellRecord(
        cell_id="c",
        status="done",
        spec={"method": "eagle", "compiled": True},
        timings={"startup_s": 9.0, "load_s": 3.0},
    )
    timings.note_cell("org/m", rec, 4, 64, 10, "r", path)
    kept = timings.read(path)
    assert [v["startup_s"] for v in kept["startups"].values()] == [9.0]
    assert [v["s_per_request"] for v in kept["loads"].values()] == [0.3]
    assert timings.server_key("org/m", Spec(method="eagle", compiled=False)) not in kept["startups"]
    path.write_text("{torn")  # a cache: a damaged file counts as empty, never an error
    assert timings.read(path) == {"startups": {}, "loads": {}}


@pytest.mark.heavy
def test_the_cold_starts_benchmark_reports_what_the_dry_run_plans(monkeypatch, tmp_path):
    """benchmarks/cold_starts.py (the performance table's row) counts what `run --dry-run` prints;
    before issue 26 the R1 study started a server per cell."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cold_starts.py"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    rows = {r["config"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert set(rows) == {f"configs/{p.name}" for p in (ROOT / "configs").glob("*.yaml")}
    monkeypatch.setenv("SPECBENCH_TIMINGS_FILE", str(tmp_path / "none.json"))
    for name, row in rows.items():
        got = printed_plan(dry_run(ROOT / name)[1])
        assert (row["cells"], row["cold_starts_now"]) == (got["cells"], got["cold_starts"]), name
    r1 = rows["configs/deepseek-r1-eagle.yaml"]
    assert r1["cold_starts_before"] == r1["cells"] == 26 and r1["cold_starts_now"] == 6


def test_an_unmeasured_node_gets_the_wall_time_its_stated_assumptions_give(monkeypatch, tmp_path):
    """Issue 57: the R1 config's dry-run said "unknown" on a new node. With ``assume:`` it prints a
    range from the stated start-up and tok/s, labelled assumed, beside the (still unknown) measured
    figure. The range recomputed here from the config's own numbers."""
    monkeypatch.setenv("SPECBENCH_TIMINGS_FILE", str(tmp_path / "none.json"))  # nothing measured
    config = ROOT / "configs" / "deepseek-r1-eagle.yaml"
    code, out, err = dry_run(config)
    assert code == 0, err
    data, got = yaml.safe_load(config.read_text()), printed_plan(out)
    load, assume = data["load"], data["assume"]
    tokens = got["requests"] * load["max_tokens"]  # every request, warm-ups too, at max_tokens
    low = got["servers"] * assume["startup_s"][0] + tokens / assume["output_tok_per_s"][1]
    high = got["servers"] * assume["startup_s"][1] + tokens / assume["output_tok_per_s"][0]
    from specbench.run.estimate import duration

    assert got["wall"] == "unknown"  # nothing measured: the measured estimate stays unknown
    line = next(x for x in out.splitlines() if x.startswith("#   assumed (not measured here): "))
    assert f"{duration(low)} – {duration(high)}" in line and assume["basis"] in line
    bad = tmp_path / "bad.yaml"
    bad.write_text(config.read_text().replace("startup_s: [900, 3600]", "startup_s: [3600, 900]"))
    code, out, err = dry_run(bad)
    assert code == 2 and "assume.startup_s" in err and "not a range" in err

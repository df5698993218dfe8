"""One cell, one interval: for every committed baseline under results/baselines, every speculative
cell and every metric, the interval acceptance.json gets (run/collect.py's build_acceptance, rebuilt
from the cell's stored counts so a change of interval method is followed), the one
``specbench report`` prints (its acceptance.csv), the one ``specbench compare`` (the run against
itself) computes over its units and the AL [CI] of the run's end screen (report/screen.py) are the
same, over the same unit kind and number of units.

compare prints only changes (self vs self: 0), so its side is checked through what it prints about
each cell (unit kind, number of units, the point estimates in --json) and the interval over the
units its reader (compare/sides.py) hands to the gates. The three are compared with each other,
never with numbers written here."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from specbench.analysis.intervals import cell_intervals
from specbench.cli.main import run_cli
from specbench.compare.sides import load_side
from specbench.records.files import Acceptance, load
from specbench.render import format as fmt
from specbench.report.assemble import titles_of
from specbench.report.screen import final_table
from specbench.results.read import read_run
from specbench.run.collect import build_acceptance

ROOT = Path(__file__).resolve().parents[1]
BASELINES = sorted(p for p in (ROOT / "results" / "baselines").iterdir() if (p / "manifest.json").exists())
# compare's --json names metrics as its gates do; acceptance.json and report use the short keys
POINT_KEYS = {"mean_acceptance_length": "mean_acceptance_length", "draft_acceptance_rate": "draft_acceptance_rate"}


def _collect_ci(acc: Acceptance):
    """What run/collect.py writes for this cell's stored counts (the CI of acceptance.json)."""
    reqs = list(acc.per_request.units) if acc.per_request is not None else None
    rebuilt = build_acceptance(
        num_spec_tokens=acc.num_spec_tokens,
        prom=acc.total,
        windows=list(acc.logs.windows),
        window_warnings=[],
        req_units=reqs,
        per_request_mode="off" if reqs is None else "on",
    )
    return rebuilt.ci


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _num(text: str) -> float | None:
    return None if text in ("", "nan", "None") else float(text)


def test_every_baseline_has_speculative_cells():
    """The test below checks something: the committed baselines are there and have CIs."""
    assert len(BASELINES) >= 5, BASELINES
    for run in BASELINES:
        assert any((c / "acceptance.json").exists() for c in run.iterdir() if c.is_dir()), run


@pytest.mark.slow  # report (with its figures) and compare over every committed run
@pytest.mark.parametrize("run", BASELINES, ids=[p.name for p in BASELINES])
def test_acceptance_report_and_compare_print_one_interval(run: Path, tmp_path: Path):
    _check_one_interval(run, tmp_path, plots=True)  # figures too: every committed run must plot


def _zero_draft_unit(unit: dict) -> dict:
    k = len(unit.get("accepted_per_position") or []) or unit.get("num_spec_tokens") or 1
    return {**unit, "num_drafts": 0, "draft_tokens": 0, "accepted_tokens": 0, "accepted_per_position": [0] * k}


def _without_positions(unit: dict) -> dict:
    return {**unit, "accepted_per_position": None}


@pytest.mark.heavy
@pytest.mark.parametrize("change", [_zero_draft_unit, _without_positions], ids=["zero-draft-request", "no-positions"])
def test_one_interval_where_the_old_choices_disagreed(change, tmp_path: Path):
    """The committed cells happen to agree under the three old rules; these copies of one do not:
    a request that drafted nothing (a unit to collect, not to compare) and per-request units
    without per-position counts (compare then took the log windows, report the requests)."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "results" / "baselines" / "cpu-default", run)
    for path in run.glob("*/acceptance.json"):
        acc = json.loads(path.read_text())
        if acc.get("per_request"):
            units = acc["per_request"]["units"]
            if change is _zero_draft_unit:
                units.append(change(units[0]))
            else:
                acc["per_request"]["units"] = [change(u) for u in units]
            path.write_text(json.dumps(acc))
    _check_one_interval(run, tmp_path, plots=False)


def _check_one_interval(run: Path, tmp_path: Path, plots: bool) -> None:
    out, cmp_json = tmp_path / "report", tmp_path / "compare.json"
    assert run_cli(["report", str(run), "--out", str(out), "--plots" if plots else "--no-plots"]) == 0
    with (out / "acceptance.csv").open(newline="") as f:
        report = {row["label"]: row for row in csv.DictReader(f)}
    assert run_cli(["compare", str(run), str(run), "--json", str(cmp_json)]) in (0, 3)
    printed = {cid: cell for cell in json.loads(cmp_json.read_text())["cells"] for cid in cell["base_ids"]}
    side = load_side(run)
    side_cells = {cid: cell for cell in side.cells.values() for cid in cell.cell_ids}

    names = titles_of(read_run(run))
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(final_table(run))
    screen = {
        name: line
        for line in buf.getvalue().splitlines()
        for name in names.values()
        if line.strip().startswith(f"{name}  ")
    }
    checked = 0
    for cell_dir in sorted(c for c in run.iterdir() if (c / "acceptance.json").exists()):
        acc = load(Acceptance, cell_dir / "acceptance.json")
        ci = _collect_ci(acc)
        if acc.baseline or ci is None:
            continue  # no speculation: no acceptance interval anywhere
        cid = cell_dir.name
        row, shown, units = report[cid], printed[cid], side_cells[cid]
        # the same units: kind and number, in all three
        assert (row["unit"], int(row["n_units"])) == (ci.unit, ci.n_units), cid
        assert (shown["unit_kind"], shown["base_units"]) == (ci.unit, ci.n_units), cid
        assert (units.unit_kind, len(units.units)) == (ci.unit, ci.n_units), cid
        iv = cell_intervals(units.units)
        assert ci.intervals, cid
        for key, (lo, hi) in ci.intervals.items():
            assert _close(lo, _num(row[f"{key}_ci_low"])) and _close(hi, _num(row[f"{key}_ci_high"])), (
                cid,
                key,
                "report",
                (lo, hi),
                (row[f"{key}_ci_low"], row[f"{key}_ci_high"]),
            )
            assert _close(lo, iv[key][0]) and _close(hi, iv[key][1]), (cid, key, "compare", (lo, hi), iv[key])
            checked += 1
        # the run's end screen: AL [CI] as the report's table prints it (2 decimals)
        al = _num(row["mean_acceptance_length"])
        shown_al = fmt.with_ci(
            al, (_num(row["mean_acceptance_length_ci_low"]), _num(row["mean_acceptance_length_ci_high"])), 2
        )
        assert f" {shown_al} " in screen[names[cid]], (cid, "screen", shown_al, screen[names[cid]])
        for metric in shown["metrics"]:
            key = POINT_KEYS.get(metric["name"]) or (
                f"p{metric['index']}" if metric["name"].startswith("per_position") else None
            )
            if key is not None:
                assert _close(metric["base"], iv.point[key]) and _close(metric["base"], _num(row[key])), (cid, key)
    assert checked > 0, run

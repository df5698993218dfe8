"""One reader: ``specbench report`` and ``specbench compare`` take every kind of input through
specbench/results/read.py, so one input gives one cell with one set of units and one interval in both.

Inputs are real files of the committed cpu-head-variants study (each of its cells had its own
server): each cell's server.log, the same log as ``specbench parse --format jsonl`` records, and the
cell's acceptance.json. Checked against independent sources: the log's windows sum to the /metrics
scrape its server answered after the load (metrics_after.prom), and an acceptance.json read alone
gives the interval the run writes for its counts."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest
from test_ci_units import _collect_ci  # the CI run/collect.py writes for a cell's stored counts today
from typer.testing import CliRunner

from specbench.analysis.intervals import cell_intervals
from specbench.cli.compare_cmd import same_run
from specbench.cli.main import app, run_cli
from specbench.compare.sides import load_side
from specbench.errors import ConfigError
from specbench.records.counts import Counts
from specbench.records.files import Acceptance, load
from specbench.report import assemble as report_build
from specbench.report.inputs import groups_from_files
from specbench.results import read as run_read
from specbench.results.read import input_kind, read_windows

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "results" / "reruns" / "head-variants-2026-12-03"
CELLS = sorted(
    c
    for c in STUDY.iterdir()
    if (c / "acceptance.json").exists() and not load(Acceptance, c / "acceptance.json").baseline
)


def _key(c: Counts) -> tuple:
    return (c.num_drafts, c.draft_tokens, c.accepted_tokens, tuple(c.accepted_per_position or ()))


def _total(units: list[Counts]) -> Counts:
    return sum(units[1:], units[0])


def _close(a, b) -> bool:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _num(text: str) -> float | None:
    return None if text in ("", "nan", "None") else float(text)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, dict[str, Path]]:
    """Per cell: its log, the log's ``specbench parse`` JSONL, and its acceptance.json."""
    out = tmp_path_factory.mktemp("one-reader")
    found = {}
    for cell in CELLS:
        res = CliRunner().invoke(app, ["parse", "--format", "jsonl", str(cell / "server.log")])
        assert res.exit_code == 0, res.output
        jsonl = out / f"{cell.name}.jsonl"
        jsonl.write_text(res.stdout)
        found[cell.name] = {"log": cell / "server.log", "jsonl": jsonl, "acceptance": cell / "acceptance.json"}
    return found


def test_the_study_has_cells_to_read():
    assert len(CELLS) >= 4, CELLS


def test_each_input_has_one_kind():
    cell = CELLS[0]
    assert input_kind(STUDY) == "run"
    assert input_kind(cell / "acceptance.json") == "acceptance"
    assert input_kind(cell / "server.log") == "records"
    assert input_kind(cell / "metrics_after.prom") == "records"
    assert input_kind(ROOT / "tests" / "metrics" / "data" / "vllm_bench" / "plain.json") == "run"


def test_a_log_and_its_parsed_records_read_alike_in_report_and_compare(inputs, tmp_path):
    """The same windows (not only the same count of them) in report's group and compare's side, for
    the log and for its parse output; their sum is what /metrics counted over the server's life."""
    for name, files in inputs.items():
        seen = {}
        for kind in ("log", "jsonl"):
            group = groups_from_files([files[kind]], [])[0]
            cell = load_side(files[kind]).cells[()]
            assert (group.unit, [_key(u) for u in group.units]) == (cell.unit_kind, [_key(u) for u in cell.units])
            seen[kind] = (group.unit, [_key(u) for u in group.units])
        assert seen["log"] == seen["jsonl"], name
        assert seen["log"][0] == "window" and len(seen["log"][1]) > 1, name
        scrape = read_windows([STUDY / name / "metrics_after.prom"])
        assert _key(_total(groups_from_files([files["log"]], [])[0].units)) == _key(scrape.units[0]), name


def test_report_prints_the_interval_compare_computes_for_logs_records_and_cells(inputs, tmp_path):
    """report's acceptance.csv (one labelled group per input) against the interval over the units
    compare's reader hands its gates; an acceptance.json read alone against the interval the run
    writes for its counts (run/collect.py)."""
    labels = [f"{name}@{kind}={path}" for name, files in inputs.items() for kind, path in files.items()]
    argv = ["report", "--out", str(tmp_path / "report"), "--no-plots"]  # the CSV is what is checked
    for label in labels:
        argv += ["--label", label]
    assert run_cli(argv) == 0
    with (tmp_path / "report" / "acceptance.csv").open(newline="") as f:
        rows = {row["label"]: row for row in csv.DictReader(f)}
    checked = 0
    for name, files in inputs.items():
        stored = _collect_ci(load(Acceptance, files["acceptance"]))
        for kind, path in files.items():
            row, side = rows[f"{name}@{kind}"], load_side(path).cells[()]
            assert (row["unit"], int(row["n_units"])) == (side.unit_kind, len(side.units)), (name, kind)
            iv = cell_intervals(side.units)
            for key, (lo, hi) in iv.items():
                assert _close(lo, _num(row[f"{key}_ci_low"])) and _close(hi, _num(row[f"{key}_ci_high"])), (name, kind)
                if kind == "acceptance":
                    assert stored is not None and (side.unit_kind, len(side.units)) == (
                        stored.unit,
                        stored.n_units,
                    )
                    assert _close(lo, stored.intervals[key][0]) and _close(hi, stored.intervals[key][1]), (
                        name,
                        key,
                    )
                checked += 1
    assert checked > 3 * len(inputs)


def test_counts_no_run_could_give_are_left_out_alike(tmp_path):
    """A per-request unit that accepted more tokens than it drafted: report and compare both leave
    it out, name it, and print the interval the cell had before it was added."""
    run = tmp_path / "run"
    shutil.copytree(STUDY, run)
    damaged = []
    for path in run.glob("*/acceptance.json"):
        acc = json.loads(path.read_text())
        if acc.get("per_request"):
            bad = dict(acc["per_request"]["units"][0])
            bad["accepted_tokens"] = bad["draft_tokens"] + 1
            acc["per_request"]["units"].append(bad)
            path.write_text(json.dumps(acc))
            damaged.append(path.parent.name)
    assert damaged
    out = tmp_path / "report"
    assert run_cli(["report", str(run), "--out", str(out), "--no-plots"]) == 0
    with (out / "acceptance.csv").open(newline="") as f:
        rows = {row["label"]: row for row in csv.DictReader(f)}
    side = load_side(run)
    cells = {cid: c for c in side.cells.values() for cid in c.cell_ids}
    for cid in damaged:
        original = _collect_ci(load(Acceptance, STUDY / cid / "acceptance.json"))
        assert original is not None
        assert (rows[cid]["unit"], int(rows[cid]["n_units"])) == (original.unit, original.n_units), cid
        assert len(cells[cid].units) == original.n_units, cid
        iv = cell_intervals(cells[cid].units)
        for key, (lo, hi) in original.intervals.items():
            assert _close(lo, _num(rows[cid][f"{key}_ci_low"])) and _close(hi, _num(rows[cid][f"{key}_ci_high"])), cid
            assert _close(lo, iv[key][0]) and _close(hi, iv[key][1]), (cid, key)
        assert any(f"{cid}/acceptance.json: per_request.units[" in w and "invalid counts" in w for w in side.warnings)
        assert "invalid counts" in rows[cid]["warnings"], cid


def test_a_report_reads_each_run_once(monkeypatch, tmp_path):
    """Tables, titles, study analysis and the copy check all use the one Run read per input."""
    calls = []
    real = run_read.read_run

    def counting(path, **kw):
        calls.append(Path(path))
        return real(path, **kw)

    monkeypatch.setattr(report_build, "read_run", counting)
    monkeypatch.setattr(run_read, "read_run", counting)
    report_build.build_report([STUDY])
    assert calls == [STUDY]


def test_a_labelled_run_directory_is_refused_naming_the_flag():
    with pytest.raises(
        ConfigError, match=r"--label x=.*head-variants-2026-12-03: a run is labelled by its cells' axes"
    ):
        groups_from_files([], [("x", STUDY)])


def test_vllm_bench_results_of_one_name_are_two_runs(tmp_path):
    """vllm bench result files carry no run id (their name stands in): two files of one name in two
    directories are two runs to report, each labelled by its path, with compare's units."""
    data = ROOT / "tests" / "metrics" / "data" / "vllm_bench"
    paths = []
    for name, src in (("a", "plain.json"), ("b", "detailed.json")):
        (tmp_path / name).mkdir()
        paths.append(shutil.copy(data / src, tmp_path / name / "result.json"))
    a, b = (Path(p) for p in paths)
    assert same_run(a, b, load_side(a), load_side(b)) is None  # compare: not "copies of one run" either
    copy = shutil.copytree(STUDY, tmp_path / "copy")
    assert "copies of one run" in (same_run(STUDY, copy, load_side(STUDY), load_side(copy)) or "")
    report = report_build.build_report([Path(p) for p in paths])
    groups = {g.label: g for g in report.groups}
    assert sorted(groups) == [f"{p}/result" for p in paths]
    for p in paths:
        cell = load_side(Path(p)).cells[()]
        group = groups[f"{p}/result"]
        assert (group.unit, [_key(u) for u in group.units]) == (cell.unit_kind, [_key(u) for u in cell.units])
        assert group.units and group.units[0].num_drafts > 0

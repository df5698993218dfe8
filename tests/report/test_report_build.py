"""specbench report: log/JSONL files and run directories -> summary.md, acceptance.csv, plots."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specbench.cli.main import app
from specbench.errors import ConfigError, InputError
from specbench.metrics.record import SpecDecodeRecord
from specbench.records.counts import Counts
from specbench.report.assemble import build_report, render_markdown, write_report
from specbench.report.inputs import parse_label

OUTPUTS = [
    "summary.md",
    "acceptance.csv",
    "per_position.png",
    "per_position.svg",
    "al_over_time.png",
    "al_over_time.svg",
]


def write_records(path, windows):
    """Canonical records (what `specbench parse` writes), one V1 window per (accepted, drafted, rates)."""
    rows = [
        SpecDecodeRecord(
            source="vllm",
            format="v1",
            file=str(path),
            line=i + 1,
            accepted_tokens=a,
            draft_tokens=t,
            per_position_acceptance=p,
        ).to_dict()
        for i, (a, t, p) in enumerate(windows)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.heavy
def test_report_on_record_file_writes_all_outputs(tmp_path):
    f = write_records(tmp_path / "a.jsonl", [(163, 279, [0.774, 0.581, 0.398]), (150, 270, [0.756, 0.522, 0.389])])
    rep = build_report([f], n_resamples=200)
    write_report(rep, tmp_path / "out")
    for name in OUTPUTS:
        assert (tmp_path / "out" / name).stat().st_size > 0, name
    csv = pd.read_csv(tmp_path / "out" / "acceptance.csv")
    # D = 93 + 90 drafts, A = 163 + 150: AL = 1 + 313/183 (hand calculation)
    assert csv.loc[0, "label"] == "a.jsonl" and csv.loc[0, "num_drafts"] == 183
    assert csv.loc[0, "mean_acceptance_length"] == pytest.approx(1 + 313 / 183)
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "includes the bonus token" in md and "2 windows" in md and "2.71 [" in md


def test_labels_group_files_and_unlabelled_files_are_own_groups(tmp_path):
    a = write_records(tmp_path / "a.jsonl", [(163, 279, [0.774, 0.581, 0.398])])
    b = write_records(tmp_path / "b.jsonl", [(150, 270, [0.756, 0.522, 0.389])])
    c = write_records(tmp_path / "c.jsonl", [(100, 270, [0.5, 0.3, 0.311])])
    rep = build_report([c], [("on", a), ("on", b)], n_resamples=200)
    assert [g.label for g in rep.groups] == ["on", "c.jsonl"]
    assert rep.summary.set_index("label").loc["on", "num_drafts"] == 183


def test_single_window_group_says_no_ci(tmp_path):
    f = write_records(tmp_path / "a.jsonl", [(163, 279, [0.774, 0.581, 0.398])])
    assert "2.75 (no CI)" in render_markdown(build_report([f], n_resamples=200))


def test_parse_label():
    assert parse_label("on=x.log") == ("on", __import__("pathlib").Path("x.log"))
    with pytest.raises(ConfigError, match="--label"):
        parse_label("no-equals")


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="nope.log: no such run directory or file"):
        build_report([tmp_path / "nope.log"])


@pytest.mark.heavy
def test_cli_exit_codes(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(app, ["report", "--label", "oops", "--out", str(tmp_path / "o")])
    assert bad.exit_code == 2 and "--label" in bad.output
    missing = runner.invoke(app, ["report", str(tmp_path / "nope.log"), "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2 and "nope.log" in missing.output
    f = write_records(tmp_path / "a.jsonl", [(163, 279, [0.774, 0.581, 0.398]), (150, 270, [0.756, 0.522, 0.389])])
    ok = runner.invoke(app, ["report", str(f), "--out", str(tmp_path / "o"), "--resamples", "200"])
    assert ok.exit_code == 0, ok.output
    assert "a.jsonl" in ok.output and (tmp_path / "o" / "summary.md").exists()


def _simulated_units(rng, alpha, n=12, drafts=40):
    units = []
    for _ in range(n):
        pos = np.cumprod(rng.random((drafts, 3)) < alpha, axis=1).sum(axis=0).astype(int).tolist()
        units.append(Counts(drafts, drafts * 3, sum(pos), pos, 3))
    return units


def make_run_dir(tmp_path):
    """A run directory written through the run store and collector, as `specbench run` writes it."""
    from specbench.results.store import write_cell, write_manifest
    from specbench.run.collect import build_acceptance

    run = tmp_path / "run1"
    rng = np.random.default_rng(0)
    cells = [("output_norm-on__r0", "on", 0.77), ("output_norm-off__r0", "off", 0.5)]
    for cell_id, value, alpha in cells:
        windows = _simulated_units(rng, alpha)
        prom = sum(windows[1:], windows[0])
        acc = build_acceptance(
            num_spec_tokens=3, prom=prom, windows=windows, window_warnings=[], req_units=None, per_request_mode="off"
        )
        write_cell(
            run,
            {"cell_id": cell_id, "axes": {"output_norm": value}, "repeat": 0, "is_baseline": False, "status": "done"},
            acc,
        )
    write_manifest(run, {"run_id": "run1", "cells": [c for c, _, _ in cells], "axes": ["output_norm"]})
    return run


@pytest.mark.heavy
def test_report_on_run_dir_states_significant_difference(tmp_path):
    run = make_run_dir(tmp_path)
    rep = build_report([run], n_resamples=300)
    assert [g.label for g in rep.groups] == ["output_norm-on__r0", "output_norm-off__r0"]
    (cmp,) = rep.comparisons
    assert (cmp.axis, cmp.cand_value, cmp.base_value) == ("output_norm", "off", "on")
    al_on = rep.summary.set_index("label").loc["output_norm-on__r0", "mean_acceptance_length"]
    assert cmp.values["mean_acceptance_length"][0] == pytest.approx(al_on)
    write_report(rep, tmp_path / "out")
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "norm off vs on: AL" in md and ", significant" in md
    assert "| norm on | 12 windows |" in md  # cells headed by their axis values, not "output_norm-on__r0"


def test_rate_only_file_is_reported_apart(tmp_path):
    rows = [
        SpecDecodeRecord(source="sglang", format="sglang", file="sg.log", line=i, mean_acceptance_length=al)
        for i, al in ((1, 2.5), (2, 3.1))
    ]
    f = tmp_path / "sg.jsonl"
    f.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    rep = build_report([f], n_resamples=200)
    md = render_markdown(rep)
    assert "Rate-only lines" in md and "from 2.50 to 3.10" in md and "not combined" in md
    assert "cannot be summed" in md
    assert rep.summary.loc[0, "n_units"] == 0


def test_failed_cell_is_listed_not_compared(tmp_path):
    from specbench.results.store import write_cell, write_manifest

    run = make_run_dir(tmp_path)
    write_cell(
        run,
        {
            "cell_id": "output_norm-x__r0",
            "axes": {"output_norm": "x"},
            "repeat": 0,
            "is_baseline": False,
            "status": "failed",
            "reason": "server died (exit 1)",
        },
        None,
    )
    write_manifest(
        run,
        {
            "run_id": "run1",
            "cells": ["output_norm-on__r0", "output_norm-off__r0", "output_norm-x__r0"],
            "axes": ["output_norm"],
        },
    )
    rep = build_report([run], n_resamples=200)
    assert len(rep.comparisons) == 1
    failed = [g for g in rep.groups if g.label == "output_norm-x__r0"][0]
    assert "server died" in failed.warnings[0]
    assert "server died" in render_markdown(rep)


@pytest.mark.heavy
def test_report_on_real_vllm_log(tmp_path):
    from pathlib import Path

    data = Path(__file__).parents[1] / "analysis" / "data"
    truth = json.loads((data / "vllm_v1_windows.truth.json").read_text())
    rep = build_report([data / "vllm_v1_windows.log"], n_resamples=300)
    write_report(rep, tmp_path / "out")
    for name in OUTPUTS:
        assert (tmp_path / "out" / name).stat().st_size > 0, name
    d = sum(t["num_drafts"] for t in truth)
    a = sum(t["accepted_tokens"] for t in truth)
    p0 = sum(t["accepted_per_position"][0] for t in truth) / d
    row = pd.read_csv(tmp_path / "out" / "acceptance.csv").iloc[0]
    assert row["label"] == "vllm_v1_windows.log" and row["n_units"] == len(truth)
    assert row["mean_acceptance_length"] == pytest.approx(1 + a / d)
    assert row["p0"] == pytest.approx(p0)
    assert row["mean_acceptance_length_ci_low"] < 1 + a / d < row["mean_acceptance_length_ci_high"]


def test_single_acceptance_json_file_is_a_group(tmp_path):
    run = make_run_dir(tmp_path)
    f = run / "output_norm-on__r0" / "acceptance.json"
    rep = build_report([f], n_resamples=200)
    (g,) = rep.groups
    assert g.label == "output_norm-on__r0" and g.unit == "window" and len(g.units) == 12
    assert rep.summary.loc[0, "num_drafts"] == 480


def test_report_labels_real_log_and_prometheus_pair(tmp_path):
    from pathlib import Path

    data = Path(__file__).parents[1] / "analysis" / "data"
    rep = build_report(
        [],
        [
            ("log", data / "real_v1_server.log"),
            ("prom", data / "real_metrics_before.prom"),
            ("prom", data / "real_metrics_after.prom"),
        ],
        n_resamples=300,
    )
    s = rep.summary.set_index("label")
    assert s.loc["log", "num_drafts"] == 541 and s.loc["log", "n_units"] == 6
    # the scrape pair is one unit: exact counts of the load, but no CI
    assert s.loc["prom", "num_drafts"] == 541 - 52 and bool(s.loc["prom", "ci_degenerate"])
    assert s.loc["prom", "mean_acceptance_length"] == pytest.approx(1 + (865 - 74) / (541 - 52))


def test_counts_that_disagree_between_sources_are_said(tmp_path):
    """A cell whose log windows or per-request counts disagree with /metrics says so in the report."""
    from pathlib import Path

    from specbench.records.files import Acceptance, load
    from specbench.report.inputs import group_from_acceptance

    src = (
        Path(__file__).resolve().parents[2] / "results/baselines/cpu-default/mla-on__output_norm-on__r0/acceptance.json"
    )
    acc = load(Acceptance, src)
    assert not group_from_acceptance("c", acc, "c").warnings
    acc.agreement.logs_vs_prometheus = False
    acc.agreement.details = {"logs": {"num_drafts": [40, 100]}}
    warnings = group_from_acceptance("c", acc, "c").warnings
    assert warnings == ["log windows disagree with the Prometheus counts {'num_drafts': [40, 100]}"]


def test_cells_from_before_attestation_are_said_to_be_not_attested():
    """The committed head-variant and k-sweep studies predate attestation: their contrasts carry no
    confounds (nothing to compare) and say which claim of the axis vLLM never confirmed."""
    from pathlib import Path

    base = Path(__file__).resolve().parents[2] / "results" / "baselines"
    variants = build_report([base.parent / "reruns" / "head-variants-2026-12-03"], n_resamples=100).comparisons
    ksweep = build_report([base.parent / "reruns" / "k-sweep-2026-12-03"], n_resamples=100).comparisons
    assert variants and all(c.unattested == ["head_variant"] and c.confounds == [] for c in variants)
    assert ksweep and all(c.unattested == ["num_speculative_tokens"] for c in ksweep)
    assert "not attested: head_variant" in variants[0].sentence()


def test_no_metrics_in_any_input_is_exit_2_and_nothing_written(tmp_path):
    """Issue 43, item 6: report on inputs without metrics (a log of another server, a UTF-16 log)
    wrote an empty table with exit 0; now exit 2 naming them, before any output is written. One
    input with metrics among them still reports."""
    empty = tmp_path / "empty.log"
    empty.write_text("INFO nothing here\n")
    utf16 = tmp_path / "utf16.log"
    utf16.write_bytes("SpecDecoding metrics: Accepted: 163 tokens, Drafted: 279 tokens\n".encode("utf-16"))
    out = tmp_path / "rep"
    res = CliRunner().invoke(app, ["report", str(empty), str(utf16), "--out", str(out), "--no-plots"])
    assert res.exit_code == 2, res.output
    assert "no SpecDecoding data in" in res.output and "empty.log" in res.output and "utf16.log" in res.output
    assert not out.exists()
    with pytest.raises(InputError, match="no SpecDecoding data in .*empty.log"):
        build_report([empty])
    good = tmp_path / "good.jsonl"
    write_records(good, [(163, 279, [0.774, 0.581, 0.398])])
    assert CliRunner().invoke(app, ["report", str(empty), str(good), "--out", str(out), "--no-plots"]).exit_code == 0

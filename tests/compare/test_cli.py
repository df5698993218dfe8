"""``specbench compare`` end to end through the Typer app: exit codes, outputs, input errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from specbench.cli.main import app
from specbench.testing.simruns import P

ON = {"mla": "on", "output_norm": "on"}
OFF = {"mla": "on", "output_norm": "off"}
DROP = [0.60, 0.40, 0.20]


def _cells(p_off):
    return [{"axes": ON, "p": P, "units": 40, "drafts": 25}, {"axes": OFF, "p": p_off, "units": 40, "drafts": 25}]


def run(*args, env=None):
    result = CliRunner().invoke(app, ["compare", *map(str, args)], env={"COLUMNS": "200", **(env or {})})
    return result.exit_code, result.output


@pytest.fixture
def pair(make_run):
    return make_run("base", _cells(P), seed=1), make_run("cand", _cells(DROP), seed=2)


def test_identical_exit_0(make_run):
    base = make_run("base", _cells(P), seed=1)
    code, out = run(base, base, "--allow-inconclusive")  # 40 requests: every interval straddles 3% / 2pp
    assert code == 0, out
    assert "worse" not in out and "better" not in out and "exit 0 because of --allow-inconclusive" in out
    code, out = run(base, base)  # not known within the tolerance: not passes
    assert code == 3 and "0 passed, 0 failed, 8 inconclusive (8 with an interval that straddles the tolerance)" in out


def test_regression_exit_1_names_cell_and_metric(pair):
    code, out = run(*pair)
    assert code == 1, out
    assert "FAIL mla=on, output_norm=off: per_position[0]" in out
    assert "REGRESSION" in out


@pytest.mark.heavy
def test_outputs(pair, tmp_path):
    md, xml, js, png, summary = (tmp_path / n for n in ("r.md", "r.xml", "r.json", "r.png", "step.md"))
    summary.write_text("earlier step\n")
    code, out = run(
        *pair, "--markdown", md, "--junit", xml, "--json", js, "--plot", png, env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert code == 1, out
    text = md.read_text()
    assert "❌" in text and "| p_0 |" in text and "🔴 worse" in text and "**FAIL**" in text
    assert "| ~ |" in text  # the unchanged cell's rows
    assert summary.read_text() == "earlier step\n" + text + "\n"  # appended, never rewritten
    root = ET.parse(xml).getroot()
    cases = root.findall("testsuite/testcase")
    # default gates: AL + 3 positions, in each of 2 cells
    assert len(cases) == 8 and root.get("failures") == str(len(root.findall(".//failure")))
    failed = {(c.get("classname"), c.get("name").split(" ")[0]) for c in cases if c.find("failure") is not None}
    # named as the terminal and the Markdown name them: cell titles and metric symbols, not keys
    assert ("norm off", "p_0") in failed, failed
    assert not any(c.get("classname") == "norm on" for c in cases if c.find("failure") is not None)
    assert not any("=" in c.get("classname") or "per_position" in c.get("name").split(" [")[0] for c in cases)
    data = json.loads(js.read_text())
    assert data["exit_code"] == 1 and data["schema_version"] == 1
    assert {r["metric"] for r in data["regressions"]} >= {"per_position[0]", "mean_acceptance_length"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_noise_only_exit_0(make_run):
    base = make_run("base", _cells(P), seed=11)
    cand = make_run("cand", _cells(P), seed=12)
    code, out = run(
        base, cand, "--gate", "per_position[*]:-2pp", "--gate", "acceptance_length:-3%", "--allow-inconclusive"
    )
    assert code == 0, out


def test_zero_tolerance_gate_catches_what_default_allows(make_run):
    small = [P[0] - 0.015, P[1], P[2]]  # 1.5 points at position 0: inside the default 2pp
    base = make_run("base", [{"axes": ON, "p": P, "units": 400, "drafts": 100}], seed=1)
    cand = make_run("cand", [{"axes": ON, "p": small, "units": 400, "drafts": 100}], seed=2)
    assert run(base, cand)[0] != 1
    code, out = run(base, cand, "--gate", "per_position[0]:0")
    assert code == 1 and "per_position[0]" in out


def test_malformed_gate_exit_2(pair):
    code, out = run(*pair, "--gate", "per_position[0]:-2pp", "--gate", "acceptance_len:-3%")
    assert code == 2
    assert "acceptance_len:-3%" in out and "METRIC[INDEX]:SIGNED_TOLERANCE" in out


def test_gate_file(pair, tmp_path):
    f = tmp_path / "gates.yaml"
    f.write_text("gates:\n  - gate: per_position[0]:-2pp\n    cells: {output_norm: on}\n")
    assert run(*pair, "--gate-file", f, "--allow-inconclusive")[0] == 0  # the drop is in the output_norm=off cell
    f.write_text("gates:\n  - per_position[0]:+2pp\n")
    code, out = run(*pair, "--gate-file", f)
    assert code == 2 and "gates[0]" in out and str(f.name) in out


def test_missing_run_exit_2(tmp_path, pair):
    code, out = run(tmp_path / "nope", pair[1])
    assert code == 2 and "nope" in out


def test_wrong_version_exit_2(pair):
    f = pair[1] / "mla-on__output_norm-off__r0" / "acceptance.json"
    data = json.loads(f.read_text())
    data["schema_version"] = 99
    f.write_text(json.dumps(data))
    code, out = run(*pair)
    assert code == 2 and "acceptance.json" in out and "schema_version 99" in out


def test_not_a_run_dir_exit_2(tmp_path, pair):
    (tmp_path / "empty").mkdir()
    code, out = run(pair[0], tmp_path / "empty")
    assert code == 2 and "manifest.json" in out


def test_mismatch_warns_and_strict_fails(make_run):
    base = make_run("base", _cells(P), seed=1)
    cand = make_run("cand", _cells(P), seed=1, manifest={"vllm_version": "0.33.0"})
    code, out = run(base, cand, "--allow-inconclusive")
    assert code == 0 and "vLLM version: baseline '0.32.0', candidate '0.33.0'" in out
    code, out = run(base, cand, "--strict")
    assert code == 2 and "--strict" in out and "vLLM version" in out


def test_one_sided_cell_reported(make_run):
    base = make_run("base", _cells(P), seed=1)
    cand = make_run("cand", _cells(P)[:1], seed=1)
    code, out = run(base, cand)
    assert code == 3 and "only in baseline: norm off (mla=on, output_norm=off)" in out
    # undecided checks one line per reason, the cell by its display name
    assert (
        "INCONCLUSIVE 1 check(s) (per_position[*]:-2pp) no data: the cell not in the candidate — norm off: p_*" in out
    )
    code, out = run(base, cand, "--verbose")
    assert "INCONCLUSIVE mla=on, output_norm=off: per_position[*]" in out  # --verbose: one line per check
    code, out = run(base, cand, "--allow-inconclusive")
    assert code == 0 and "inconclusive; exit 0 because of --allow-inconclusive" in out
    assert run(base, cand, "--strict")[0] == 2


def test_runs_with_no_cell_in_common_exit_2(make_run):
    base = make_run("base", [{"axes": {"mla": "on"}, "p": P, "units": 5, "drafts": 10}])
    cand = make_run("cand", [{"axes": {"draft": "x"}, "p": P, "units": 5, "drafts": 10}])
    code, out = run(base, cand)
    assert code == 2 and "no cell of" in out and "matches a cell of" in out


def test_error_rate_is_stated_and_holm_can_be_turned_off(pair):
    code, out = run(*pair)
    assert "false alarms: <= 2.5% one-sided for the whole compare, Holm over all 8 decided checks" in out
    code, out = run(*pair, "--no-holm")
    assert code == 1 and "<= 2.5% one-sided per check, no correction (--no-holm): over 8 checks" in out


def test_the_json_exit_code_is_the_process_exit_code(make_run, tmp_path):
    """One place decides a compare's exit code (cli/exits.py compare_exit): --allow-inconclusive included,
    so the JSON a CI step reads never says 3 where the process exited 0."""
    base = make_run("base", _cells(P), seed=1)
    for flags, expected in (((), 3), (("--allow-inconclusive",), 0)):
        js = tmp_path / f"r{expected}.json"
        code, out = run(base, base, "--json", js, *flags)
        doc = json.loads(js.read_text())
        assert code == doc["exit_code"] == expected, out
        assert doc["checks"]["inconclusive"] == 8 and doc["allow_inconclusive"] is bool(flags)


def test_a_decided_check_cannot_be_edited_after_its_decision(pair):
    """GateResult is frozen: later steps (Holm, power) make new ones instead of editing a verdict."""
    import dataclasses

    from specbench.compare.verdicts import GateResult, Status

    g = GateResult(cell="c", gate="g", metric="m", status=Status.PASS, message="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.status = Status.FAIL  # type: ignore[misc]
    assert f"{g.status}" == "pass" == json.loads(json.dumps({"s": g.status}))["s"]

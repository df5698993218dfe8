"""A pass means "known to be within tolerance" (issue 54; specbench/compare/power.py): a check passes
only when its interval's upper end of harm is within the tolerance, fails only when its lower end is
past it (after Holm), and is otherwise inconclusive, saying how many prompts would decide it. A check
whose tolerance reaches the metric's worst value cannot fail and is counted apart. Copies of the
committed CPU baseline (20 prompts per cell), cut to fewer prompts or given a dead head."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from realruns import BASELINE, SPEC_CELLS, run
from rewrite import dead, first_prompts

GATES = ["--gate", "acceptance_length:-5%", "--gate", "per_position[*]:-5pp"]


@pytest.mark.heavy
@pytest.mark.parametrize("prompts", [3, 5, 8, 20])
def test_a_dead_head_never_passes(tmp_path, prompts):
    """0 accepted on every prompt of one cell (AL 2.72 -> 1.00): passed at 3-6 prompts before issue
    37. No check of it is a pass (a check that cannot fail is no pass), with or without Holm."""
    base = first_prompts(tmp_path / "b", prompts)
    cand = first_prompts(tmp_path / "c", prompts, [SPEC_CELLS[0]], dead)
    js = tmp_path / "r.json"
    for extra in ([], ["--no-holm"]):
        for gates in ([], GATES):
            code, out = run(base, cand, "--json", js, *gates, *extra, "--verbose")
            (cell,) = [c for c in json.loads(js.read_text())["cells"] if c["base_ids"] == [SPEC_CELLS[0]]]
            passes = [g for g in cell["gates"] if g["status"] == "pass" and not g["cannot_fail"]]
            assert len(cell["gates"]) == 4 and not passes, (extra, gates, passes)
            assert code in (1, 3), out
    if prompts == 20:
        assert {g["status"] for g in cell["gates"]} == {"fail"} and code == 1


@pytest.mark.heavy
def test_an_interval_that_straddles_the_tolerance_is_inconclusive_and_says_what_decides_it(copy, tmp_path):
    """At 20 prompts a -5% AL gate's intervals reach past 5% in most cells: those checks are not known
    to be within the tolerance. Exit 3; one line for them by default, each check's count with
    --verbose; Markdown and JUnit never count them as passes."""
    md, xml = tmp_path / "r.md", tmp_path / "r.xml"
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-5%", "--markdown", md, "--junit", xml)
    assert code == 3, out
    assert "not known to be within acceptance_length:-5% (the interval straddles the tolerance): needs ~" in out
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-5%", "--markdown", md, "--junit", xml, "--verbose")
    assert "mean_acceptance_length: not known to be within the tolerance: the interval allows a drop of up to" in out
    assert "prompts (has 20) to pass" in out
    assert "### Inconclusive (not a pass)" in md.read_text() and "✅" not in md.read_text()
    suite = ET.parse(xml).getroot().find("testsuite")
    errors = [c for c in suite.findall("testcase") if c.find("error") is not None]
    assert int(suite.get("errors")) == len(errors) >= 1


def test_a_gate_its_checks_can_see_passes(copy, tmp_path):
    """A tolerance the 20 prompts' intervals lie within (AL -20%) passes: every interval's upper end
    of harm is at or below the tolerance."""
    js = tmp_path / "r.json"
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-20%", "--json", js)
    assert code == 0, out
    checks = [g for c in json.loads(js.read_text())["cells"] for g in c["gates"]]
    assert len(checks) == 6 and all(g["harm_ci"][1] <= g["tolerance"] and not g["undecided"] for g in checks)
    assert "no regression: 6 passed" in out


def test_a_tolerance_past_the_metrics_worst_value_cannot_fail_and_is_no_pass(copy, tmp_path):
    """p_2 is 0 in the output-norm-off cells: no candidate can drop it 5pp. Such a check guards
    nothing that can happen: "cannot fail", counted apart in the headline and the JSON, skipped in JUnit."""
    js, xml = tmp_path / "r.json", tmp_path / "r.xml"
    code, out = run(BASELINE, copy, "--gate", "per_position[2]:-5pp", "--json", js, "--junit", xml)
    data = json.loads(js.read_text())
    off = [g for c in data["cells"] if c["axes"]["output_norm"] == "off" for g in c["gates"]]
    assert len(off) == 2 and all(g["status"] == "pass" and g["cannot_fail"] for g in off)
    assert all(g["notes"][0].startswith("cannot fail: no drop past the tolerance is possible") for g in off)
    assert data["checks"]["cannot_fail"] == 2 and "2 cannot fail" in out
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite.get("skipped") == "2" and len([c for c in suite.iter("skipped")]) == 2

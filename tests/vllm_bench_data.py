"""The ``vllm bench serve`` fixture files (tests/metrics/data/vllm_bench/) and what their /metrics
scrapes say each benchmark did (prometheus_client's parser: an independent source, not ours).
Shared by tests/metrics/test_vllm_bench.py and tests/results/test_sweep.py."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

DATA = Path(__file__).parent / "metrics" / "data" / "vllm_bench"
K = 3


def counters(path: Path) -> dict[str, float]:
    """Spec-decode counters of one scrape, summed over engines; per position as ``..._per_pos[i]``."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            spec = s.name.startswith("vllm:spec_decode") or s.name == "vllm:generation_tokens_total"
            if s.name.endswith("_total") and spec:
                key = s.name + (f"[{s.labels['position']}]" if "position" in s.labels else "")
                out[key] = out.get(key, 0.0) + s.value
    return out


def scrape_diff(before: int, after: int) -> dict[str, object]:
    """What the benchmark between scrapes ``before`` and ``after`` did, from /metrics alone."""
    a, b = counters(DATA / "scrapes" / f"{before:02d}.prom"), counters(DATA / "scrapes" / f"{after:02d}.prom")
    d = {k: int(b[k] - a.get(k, 0.0)) for k in b}
    return {
        "num_drafts": d["vllm:spec_decode_num_drafts_total"],
        "draft_tokens": d["vllm:spec_decode_num_draft_tokens_total"],
        "accepted_tokens": d["vllm:spec_decode_num_accepted_tokens_total"],
        "accepted_per_position": [d[f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]"] for i in range(K)],
        "generation_tokens": d["vllm:generation_tokens_total"],
    }

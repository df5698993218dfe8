"""/metrics series identity (specbench/metrics/prometheus.py): full label set, not the engine label."""

from __future__ import annotations

from specbench.analysis.windows import counts_from_records
from specbench.metrics.prometheus import parse_prometheus


def _scrape(series: list[tuple[str, int, int, int]]) -> str:
    lines = []
    for labels, d, t, a in series:
        lines += [
            f"vllm:spec_decode_num_drafts_total{{{labels}}} {d}.0",
            f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {t}.0",
            f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {a}.0",
        ]
    return "\n".join(lines) + "\n"


def test_series_sharing_an_engine_label_are_kept_apart_and_summed():
    # two models served behind one exporter, both engine 0: they used to overwrite each other
    text = _scrape([('engine="0",model_name="a"', 100, 300, 150), ('engine="0",model_name="b"', 40, 120, 60)])
    recs = parse_prometheus(text, file="m.prom")
    assert sorted(r.num_drafts for r in recs) == [40, 100]
    (w,), _ = counts_from_records(recs)
    assert (w.num_drafts, w.draft_tokens, w.accepted_tokens) == (140, 420, 210)


def test_non_integer_engine_labels_do_not_collapse():
    """Engine ids that are not integers (engine None in the record) are still separate series, and
    a before/after pair sums them before differencing (it used to subtract one from the other)."""
    before = parse_prometheus(_scrape([('engine="dp-a"', 100, 300, 150), ('engine="dp-b"', 40, 120, 60)]), file="b")
    after = parse_prometheus(_scrape([('engine="dp-a"', 160, 480, 246), ('engine="dp-b"', 50, 150, 70)]), file="a")
    assert sorted(r.num_drafts for r in before) == [40, 100]
    (w,), warnings = counts_from_records(before + after)
    assert (w.num_drafts, w.draft_tokens, w.accepted_tokens) == (70, 210, 106) and warnings == []


def test_scrape_time_labels_do_not_split_a_series():
    # a Prometheus server adds instance/job; the same series scraped twice must still diff
    before = parse_prometheus(_scrape([('engine="0",instance="h:1",job="a"', 100, 300, 150)]), file="b.prom")
    after = parse_prometheus(_scrape([('engine="0",instance="h:2",job="b"', 160, 480, 246)]), file="a.prom")
    (w,), _ = counts_from_records(before + after)
    assert (w.num_drafts, w.accepted_tokens) == (60, 96)

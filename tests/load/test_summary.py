"""llmperf-keyed summary (specbench/load/summary.py) on hand-made request records."""

from __future__ import annotations

import pytest

from specbench.load.summary import summarize


def rec(i, ttft, itl, e2e, out, err=None):
    return {
        "id": i,
        "ttft_s": ttft,
        "itl_s": itl,
        "e2e_s": e2e,
        "output_tokens": out,
        "input_tokens": 10,
        "error": err,
        "error_code": 500 if err else None,
    }


def test_errors_count_apart_and_metrics_use_successes_only():
    reqs = [
        rec(0, 0.1, [0.01, 0.03], 0.2, 3),
        rec(1, 0.3, [0.02, 0.02], 0.4, 3),
        rec(2, None, [], 9.0, None, err="HTTP 500: boom"),
    ]
    s = summarize(reqs, 2.0, model="m", name="m_summary", concurrency=2, max_tokens=3)
    assert s["results_num_requests_started"] == 3 and s["results_num_completed_requests"] == 2
    assert s["results_number_errors"] == 1 and s["results_error_rate"] == pytest.approx(1 / 3)
    assert s["results_error_code_frequency"] == "{'500': 1}"
    assert s["results_ttft_s_quantiles_p50"] == pytest.approx(0.2)
    assert s["results_inter_token_latency_s_mean"] == pytest.approx(0.02)
    assert s["results_end_to_end_latency_s_max"] == pytest.approx(0.4)  # the failed 9 s is left out
    assert s["results_request_output_throughput_token_per_s_min"] == pytest.approx(3 / 0.4)
    assert s["results_mean_output_throughput_token_per_s"] == pytest.approx(6 / 2.0)
    assert s["results_num_completed_requests_per_min"] == pytest.approx(60.0)
    assert s["results_ttft_s_stddev"] == pytest.approx(0.1414213562, rel=1e-6)  # sample std, as pandas


def test_single_request_has_no_stddev_and_empty_run_is_all_none():
    s = summarize([rec(0, 0.1, [0.01], 0.2, 2)], 1.0, model="m", name="n")
    assert s["results_ttft_s_stddev"] is None and s["results_ttft_s_mean"] == pytest.approx(0.1)
    empty = summarize([], 1.0, model="m", name="n")
    assert empty["results_ttft_s_mean"] is None and empty["results_error_rate"] == 0.0

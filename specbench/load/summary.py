"""Per-run summary with llmperf's key names, computed from the per-request records.

Mirrors ray-project/llmperf's ``metrics_summary``: each metric has one value per successful
request; its quantiles (p25..p99, linear interpolation as pandas), mean, min, max and sample
standard deviation are written as ``results_<metric>_quantiles_pNN`` / ``_mean`` / ... Failed
requests count in ``results_num_requests_started`` and the error keys only. Users' llmperf tooling
reads our summary.json unchanged.

One definition differs on purpose: llmperf's per-request ``inter_token_latency_s`` is the
request's total time divided by the number of chunks; ours is the mean gap per generated token
after the first, ``(e2e - ttft) / (output_tokens - 1)`` in effect, which stays meaningful when a
speculative step streams several tokens in one chunk.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import numpy as np

QUANTILES = (0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
METRICS = (
    "inter_token_latency_s",
    "ttft_s",
    "end_to_end_latency_s",
    "request_output_throughput_token_per_s",
    "number_input_tokens",
    "number_output_tokens",
)


def llmperf_row(req: dict[str, Any]) -> dict[str, Any]:
    """One request as llmperf's individual-response keys (our records carry more)."""
    out_tokens = req.get("output_tokens") or 0
    e2e = req.get("e2e_s")
    itl = req.get("itl_s")
    # llmperf-run records carry no per-token list, only llmperf's own per-request value.
    mean_itl = float(np.mean(itl)) if itl else req.get("llmperf_inter_token_latency_s")
    return {
        "error_code": req.get("error_code") if req.get("error") else None,
        "error_msg": req.get("error") or "",
        "inter_token_latency_s": mean_itl,
        "ttft_s": req.get("ttft_s"),
        "end_to_end_latency_s": e2e,
        "request_output_throughput_token_per_s": (out_tokens / e2e) if e2e else None,
        "number_total_tokens": (req.get("input_tokens") or 0) + out_tokens,
        "number_output_tokens": out_tokens,
        "number_input_tokens": req.get("input_tokens"),
    }


def summarize_rows(rows: list[dict[str, Any]], duration_s: float) -> dict[str, Any]:
    """llmperf's ``results_*`` keys from rows in its individual-response format."""
    ok = [r for r in rows if not _failed(r)]
    out: dict[str, Any] = {}
    for metric in METRICS:
        values = np.array([float(r[metric]) for r in ok if r.get(metric) is not None], dtype=float)
        values = values[~np.isnan(values)]
        prefix = f"results_{metric}"
        for q in QUANTILES:
            out[f"{prefix}_quantiles_p{int(q * 100)}"] = _num(np.quantile(values, q)) if values.size else None
        out[f"{prefix}_mean"] = _num(values.mean()) if values.size else None
        out[f"{prefix}_min"] = _num(values.min()) if values.size else None
        out[f"{prefix}_max"] = _num(values.max()) if values.size else None
        out[f"{prefix}_stddev"] = _num(values.std(ddof=1)) if values.size > 1 else None
    errors = [r.get("error_code") for r in rows if _failed(r)]
    out["results_num_requests_started"] = len(rows)
    out["results_error_rate"] = len(errors) / len(rows) if rows else 0.0
    out["results_number_errors"] = len(errors)
    out["results_error_code_frequency"] = str(dict(Counter(str(e) for e in errors)))
    total_out = sum(int(r.get("number_output_tokens") or 0) for r in ok)
    out["results_mean_output_throughput_token_per_s"] = total_out / duration_s if duration_s > 0 else None
    out["results_num_completed_requests"] = len(ok)
    out["results_num_completed_requests_per_min"] = len(ok) / duration_s * 60 if duration_s > 0 else None
    return out


def summarize(
    requests: list[dict[str, Any]],
    duration_s: float,
    *,
    model: str,
    name: str,
    concurrency: int | None = None,
    max_tokens: int | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary.json payload for request records; ``extra`` (the llmperf adapter's labels and
    server-true figures) replaces the built-in driver's ``specbench_*`` keys."""
    rows = [llmperf_row(r) for r in requests]
    ins = [r["number_input_tokens"] for r in rows if r["number_input_tokens"] is not None]
    head = {
        "version": "2023-08-31",  # llmperf's summary format version, which the keys follow
        "name": name,
        "model": model,
        "mean_input_tokens": _num(np.mean(ins)) if ins else None,
        "stddev_input_tokens": _num(np.std(ins, ddof=1)) if len(ins) > 1 else None,
        "mean_output_tokens": max_tokens,  # what was asked for, as llmperf records it
        "stddev_output_tokens": 0,
        "num_concurrent_requests": concurrency,
    }
    results = summarize_rows(rows, duration_s)
    # One meaning per specbench_* key across drivers: the built-in driver's output tokens are the
    # server's usage counts already; the llmperf adapter passes its server-true figures in extra.
    ours = {
        "specbench_load_driver": "builtin",
        "specbench_itl_method": _itl_method(requests),
        "specbench_itl_definition": "mean per-token gap after the first token (chunk gaps spread over their tokens)",
        "specbench_output_tok_per_s": results["results_mean_output_throughput_token_per_s"],
        "specbench_output_tok_per_s_definition": "server output tokens (usage) of completed requests / load duration",
    }
    return {**head, **results, "timestamp": int(time.time()), **ours, **(extra or {})}


def _itl_method(requests: list[dict[str, Any]]) -> str:
    methods = {r.get("itl_method") or "per_token" for r in requests if not r.get("error")}
    return methods.pop() if len(methods) == 1 else ("mixed: " + ", ".join(sorted(methods)) if methods else "none")


def _failed(row: dict[str, Any]) -> bool:
    return row.get("error_code") is not None or bool(row.get("error_msg"))


def _num(x: Any) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x

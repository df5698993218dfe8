"""Reconcile what llmperf recorded with what the load asked for and what the server saw.

Measured on ray-project/llmperf f1d6bed (``token_benchmark_ray.py``), the reasons its files cannot
be taken at their word:
- A failed request kills the thread that sent it (its e2e latency is 0, and the thread divides
  by it: ZeroDivisionError) before it is recorded, so the request vanishes and that thread sends
  nothing more; with every request failing llmperf crashes without writing any file.
- Each thread checks the completed count before it sends, so up to concurrency - 1 requests are
  sent after the last one that counts; their results are discarded, but the server served them
  and they are in the /metrics diff.
- Its token counts come from its own (Llama) tokenizer, not the server's.

The server is the judge: the /metrics diff around the llmperf process gives the requests it
answered by HTTP status (``http_requests_total``), the requests it finished and the tokens it
generated. Every request the load asked for that llmperf did not record becomes a failed request
record (``llmperf_dropped``), so ``max_error_rate`` sees it.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from specbench.records.requests import RequestRow

CHAT = "/v1/chat/completions"
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
# What llmperf and Python print when a request fails, in llmperf's (and its Ray workers') output.
_ERROR_LINES = re.compile(r"Warning Or Error: .*|specbench-llmperf: .*|\w*Error: .*")


def server_counts(prom_text: str | None) -> dict[str, Any] | None:
    """The counters reconciliation needs from one /metrics scrape, or None without any."""
    if not prom_text:
        return None
    out: dict[str, Any] = {"http": {}, "finished": {}, "generation_tokens": 0.0, "prompt_tokens": 0.0, "in_flight": 0.0}
    seen = False
    for line in prom_text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), dict(_LABEL.findall(m.group(2) or "")), m.group(3)
        try:
            v = float(value)
        except ValueError:
            continue
        if name == "http_requests_total" and labels.get("handler") == CHAT:
            out["http"][labels.get("status", "?")] = out["http"].get(labels.get("status", "?"), 0.0) + v
        elif name == "vllm:request_success_total":
            reason = labels.get("finished_reason", "?")
            out["finished"][reason] = out["finished"].get(reason, 0.0) + v
        elif name == "vllm:generation_tokens_total":
            out["generation_tokens"] += v
        elif name == "vllm:prompt_tokens_total":
            out["prompt_tokens"] += v
        elif name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
            out["in_flight"] += v
        else:
            continue
        seen = True
    return out if seen else None


def diff_server(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """after - before, as integers; None when either scrape is missing."""
    if before is None or after is None:
        return None

    def sub(a: dict, b: dict) -> dict[str, int]:
        return {
            k: int(round(a.get(k, 0.0) - b.get(k, 0.0)))
            for k in sorted(set(a) | set(b))
            if round(a.get(k, 0.0) - b.get(k, 0.0))
        }

    http = sub(after["http"], before["http"])
    finished = sub(after["finished"], before["finished"])
    return {
        "http_status": http,
        "sent": sum(http.values()),
        "http_failed": sum(v for s, v in http.items() if not s.startswith("2")),
        "finished": finished,
        "completed": sum(v for r, v in finished.items() if r not in ("abort", "error")),
        "generation_tokens": int(round(after["generation_tokens"] - before["generation_tokens"])),
        "prompt_tokens": int(round(after["prompt_tokens"] - before["prompt_tokens"])),
    }


def error_lines(log_text: str, limit: int = 5) -> list[str]:
    """Distinct failure messages from llmperf's output, the server's own first (Ray prefixes dropped)."""
    seen: list[str] = []
    for line in log_text.splitlines():
        m = _ERROR_LINES.search(line)
        if m and m.group(0).strip().replace("specbench-llmperf: ", "", 1) not in seen:
            seen.append(m.group(0).strip().replace("specbench-llmperf: ", "", 1))
    # The server's own words first, then llmperf's client's, then Python's (stable within each).
    seen.sort(key=lambda msg: 0 if msg.startswith("server answered") else 1 if msg.startswith("Warning Or") else 2)
    return seen[:limit]


def reconcile(
    requested: int,
    rows: Sequence[RequestRow],
    server: dict[str, Any] | None,
    log_text: str = "",
    started: int | None = None,
    timed_out: bool = False,
) -> tuple[list[RequestRow], dict[str, Any]]:
    """Failed-request records for what llmperf did not record, and the accounting of the load.

    ``rows`` are the request records read from llmperf's files (possibly none); ``started`` is its
    ``results_num_requests_started``; ``server`` the :func:`diff_server` of the load.
    """
    recorded_ok = sum(1 for r in rows if not r.get("error"))
    recorded_failed = len(rows) - recorded_ok
    http_failed = server["http_failed"] if server else 0
    missing = max(0, requested - recorded_ok - recorded_failed)
    # Failures llmperf dropped that the server saw, at least; the rest of the shortfall was never
    # sent (its thread died) or ran out of llmperf's whole-test time.
    dropped_failed = max(0, http_failed - recorded_failed)
    n_new = max(missing, dropped_failed)
    messages = error_lines(log_text)
    detail = ("; ".join(messages))[:400] if messages else "no message in llmperf's output"
    new: list[RequestRow] = []
    codes = [
        s for s, v in sorted((server or {}).get("http_status", {}).items()) if not s.startswith("2") for _ in range(v)
    ]
    for i in range(n_new):
        if i < dropped_failed:
            code = codes[i] if i < len(codes) else None
            why = f"HTTP {code}, dropped by llmperf: {detail}"
        elif timed_out:
            code, why = None, "not completed within llmperf's whole-test timeout (load.llmperf.test_timeout_s)"
        else:
            code = None
            why = (
                f"not recorded by llmperf: its sending thread stopped after a failed request ({detail})"
                if dropped_failed or messages
                else "not recorded by llmperf"
            )
        new.append(_failed_record(len(rows) + i, why, code))
    acc: dict[str, Any] = {
        "requested": requested,
        "llmperf_started": started,
        "recorded": len(rows),
        "failed": recorded_failed + n_new,
        "dropped_failed": dropped_failed,
        "timed_out": timed_out,
    }
    acc.update(_server_accounting(server, recorded_ok))
    return new, acc


def _server_accounting(server: dict[str, Any] | None, recorded_ok: int) -> dict[str, Any]:
    if not server:
        return {"acceptance_covers": "no /metrics scrape around the load: request set not checked"}
    extra = max(0, server["completed"] - recorded_ok)
    return {
        "server": server,
        "server_not_recorded": extra,
        "acceptance_covers": (
            f"the /metrics diff covers {server['completed']} requests the server completed; "
            f"requests.jsonl records {recorded_ok}"
            + (
                f" ({extra} more were sent by llmperf past num_requests or lost by it, "
                "and are in the acceptance counts but not in latency)"
                if extra
                else ""
            )
        ),
    }


def _failed_record(i: int, why: str, code: Any) -> RequestRow:
    return {
        "id": i,
        "prompt_id": None,
        "category": "llmperf",
        "start_s": None,
        "ttft_s": None,
        "itl_s": None,
        "e2e_s": None,
        "llmperf_inter_token_latency_s": None,
        "output_tokens": None,
        "input_tokens": None,
        "chunks": None,
        "text": None,
        "token_ids": None,
        "finish_reason": None,
        "itl_method": None,
        "error": why,
        "error_code": _code(code),
        "spec_decode": None,
        "llmperf_dropped": True,
    }


def _code(code: Any) -> Any:
    return code if code is not None else -1


class ServerSpan:
    """When the server was busy with the load, from /metrics scrapes taken while llmperf runs.

    llmperf's own duration includes its Ray actors' start-up (~7 s measured); the built-in
    driver's runs from the first send to the last response. The server-side span (first scrape
    showing the load's first request, to the scrape showing its last request finished) is the
    closest match, to the scrape interval.
    """

    def __init__(self, before: dict[str, Any] | None):
        self.before = before
        self.first: float | None = None
        self.last: float | None = None
        self._done: float | None = _done(before) if before else None

    def observe(self, t: float, counts: dict[str, Any] | None) -> None:
        if counts is None or self.before is None:
            return
        b = self.before
        active = (
            counts["in_flight"] > 0
            or counts["prompt_tokens"] > b["prompt_tokens"]
            or sum(counts["http"].values()) > sum(b["http"].values())
        )
        if active and self.first is None:
            self.first = t
        done = _done(counts)
        if done != self._done:
            self._done, self.last = done, t

    @property
    def seconds(self) -> float | None:
        if self.first is None or self.last is None or self.last <= self.first:
            return None
        return self.last - self.first


def _done(c: dict[str, Any]) -> float:
    return sum(c["finished"].values()) + sum(v for s, v in c["http"].items() if not s.startswith("2"))

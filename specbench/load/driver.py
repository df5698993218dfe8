"""Built-in load driver: closed-loop streaming chat completions against a vLLM server.

``concurrency`` workers each take the next request from a fixed, seeded order until
``num_requests`` have been sent (closed loop: a worker sends its next request when the previous one
finished). Every request streams ``/v1/chat/completions`` with ``stream_options`` asking for usage.

Timing per request (``time.perf_counter`` on the client):
- ``ttft_s``: send -> first chunk that carries a generated token.
- ``itl_s``: one inter-token latency per generated token after the first. With speculation one
  chunk carries several tokens (one verify step emits up to k+1), so a chunk's gap since the
  previous token-bearing chunk is spread evenly over the tokens it carries. The token count per
  chunk is exact: vLLM streams the delta's ``token_ids`` when asked (``return_token_ids``), and,
  independently, cumulative ``usage.completion_tokens`` on every chunk with
  ``stream_options.continuous_usage_stats``; we use token_ids, else the usage delta. Tokens that
  arrive in the first chunk beyond the first get 0 (they arrived with it). Servers that give neither
  fall back to one token per chunk, and the request is marked ``itl_method: "per_chunk"``.
- ``e2e_s``: send -> end of stream. ``output_tokens`` / ``input_tokens``: the server's final usage.
- ``spec_decode``: the request's own acceptance counts from ``metrics.speculative_decoding`` on the
  final usage chunk, present when the server runs with ``--per-request-spec-decode-metrics summary``
  (or ``detailed``; vLLM 0.32). vLLM gives a histogram of verify steps by accepted draft count j;
  we turn it into the canonical counts: num_drafts = steps, accepted_per_position[i] = steps with
  j > i (acceptance is a prefix), exactly what vLLM's Prometheus counters add up per step.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, cast

import httpx

from specbench.io import save_json, write_jsonl
from specbench.load.prompt_sets import Prompt
from specbench.load.summary import summarize
from specbench.records.cell import LoadAccounting
from specbench.records.requests import RequestRow


@dataclass
class LoadPlan:
    num_requests: int
    concurrency: int
    max_tokens: int
    temperature: float = 0.0
    seed: int = 0
    timeout_s: float = 300.0
    top_p: float = 1.0
    ignore_eos: bool = False
    shuffle: bool = True  # seeded permutation of the prompts, cycled
    # "workload": a prompt's own output length (Prompt.output_len: ShareGPT's first reply, MT-bench's
    # 256) as its max_tokens, max_tokens where it has none; "max_tokens": max_tokens for every request
    output_len: str = "max_tokens"
    api_key: str | None = None  # sent as a bearer token, never written out
    extra_body: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("api_key")
        return d


@dataclass
class LoadSent:
    """What a load generator says of the load it sent: the requests, concurrency and max_tokens
    (summary.json's labels) and, from llmperf, its own figures and its accounting of what it
    recorded against what the server saw (cell.json's ``load_accounting``)."""

    num_requests: int | None = None
    concurrency: int | None = None
    max_tokens: int | None = None  # llmperf: its mean_output_tokens
    load_generator: str | None = None  # "llmperf"; None: this driver
    mean_input_tokens: int | None = None
    llmperf_name: str | None = None
    llmperf_started: int | None = None
    llmperf_output_tok_per_s: float | None = None
    accounting: LoadAccounting | None = None
    # summary.json's extra labels (llmperf's server-true throughput and its definitions); the
    # accounting follows them as specbench_llmperf_accounting
    summary_extra: dict[str, str | float | None] | None = None


@dataclass
class LoadResult:
    """A load's request rows (requests.jsonl), when it started and how long it took, and what it sent."""

    requests: list[RequestRow]
    started_at: str
    duration_s: float
    model: str = ""
    base_url: str = ""
    sent: LoadSent = field(default_factory=LoadSent)


def request_order(prompts: list[Prompt], plan: LoadPlan) -> list[Prompt]:
    """The prompts sent, in order: a seeded permutation cycled to ``num_requests``."""
    if not prompts:
        raise ValueError("no prompts to send")
    idx = list(range(len(prompts)))
    if plan.shuffle:
        random.Random(plan.seed).shuffle(idx)
    return [prompts[idx[i % len(idx)]] for i in range(plan.num_requests)]


def run_load(
    base_url: str,
    model: str,
    prompts: list[Prompt],
    plan: LoadPlan,
    progress: Callable[[int, int], None] | None = None,
    start: int = 0,
) -> LoadResult:
    """Send ``plan.num_requests`` streaming requests; see the module docstring for the timings.

    ``start`` > 0 sends requests ``start .. start + num_requests - 1`` of the same seeded order (ids
    too): a later batch of a precision-driven load continues where the previous one stopped."""
    if plan.num_requests < 1 or plan.concurrency < 1 or plan.max_tokens < 1 or start < 0:
        raise ValueError("num_requests, concurrency and max_tokens must be >= 1, start >= 0")
    order = request_order(prompts, replace(plan, num_requests=start + plan.num_requests))[start:]
    return asyncio.run(_run(base_url.rstrip("/"), model, order, plan, progress, start))


async def _run(base_url, model, order, plan, progress, first_id: int = 0) -> LoadResult:
    queue: asyncio.Queue[tuple[int, Prompt]] = asyncio.Queue()
    for i, p in enumerate(order):
        queue.put_nowait((i, p))
    results: list[RequestRow | None] = [None] * len(order)
    done = 0
    headers = {"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}
    limits = httpx.Limits(max_connections=plan.concurrency, max_keepalive_connections=plan.concurrency)
    timeout = httpx.Timeout(plan.timeout_s, connect=min(30.0, plan.timeout_s))
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, limits=limits, timeout=timeout, trust_env=False
    ) as client:

        async def worker() -> None:
            nonlocal done
            while True:
                try:
                    i, prompt = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                results[i] = await _one(client, model, first_id + i, prompt, plan, t0)
                done += 1
                if progress is not None:
                    progress(done, len(order))

        await asyncio.gather(*(worker() for _ in range(min(plan.concurrency, len(order)))))
    duration = time.perf_counter() - t0
    return LoadResult(
        requests=[r for r in results if r is not None],
        started_at=started_at,
        duration_s=duration,
        model=model,
        base_url=base_url,
        sent=LoadSent(num_requests=plan.num_requests, concurrency=plan.concurrency, max_tokens=plan.max_tokens),
    )


def _body(model: str, prompt: Prompt, plan: LoadPlan) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": prompt.messages,
        "max_tokens": prompt.output_len if plan.output_len == "workload" and prompt.output_len else plan.max_tokens,
        "temperature": plan.temperature,
        "top_p": plan.top_p,
        # Same seed for every request: a prompt gets the same sample whatever its position.
        "seed": plan.seed,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "return_token_ids": True,
    }
    if plan.ignore_eos:
        body["ignore_eos"] = True
    body.update(plan.extra_body)
    return body


def _new_record(i: int, prompt: Prompt, itl: list[float], token_ids: list[int]) -> RequestRow:
    return {
        "id": i,
        "prompt_id": prompt.id,
        "category": prompt.category,
        "workload": prompt.workload,
        "prompt_sha256": prompt.sha256,
        "start_s": None,
        "ttft_s": None,
        "itl_s": itl,
        "e2e_s": None,
        "output_tokens": None,
        "input_tokens": None,
        "chunks": 0,
        "text": "",
        "token_ids": token_ids,
        "finish_reason": None,
        "itl_method": "per_token",
        "error": None,
        "error_code": None,
        "spec_decode": None,
    }


async def _one(client: httpx.AsyncClient, model: str, i: int, prompt: Prompt, plan: LoadPlan, t0: float) -> RequestRow:
    itl: list[float] = []
    ids: list[int] = []
    rec = _new_record(i, prompt, itl, ids)
    start = time.perf_counter()
    rec["start_s"] = start - t0
    last_t: float | None = None
    cum_tokens = 0
    texts: list[str] = []
    try:
        async with client.stream("POST", "/v1/chat/completions", json=_body(model, prompt, plan)) as resp:
            if resp.status_code != 200:
                body = (await resp.aread()).decode("utf-8", errors="replace")
                rec["error_code"] = resp.status_code
                rec["error"] = f"HTTP {resp.status_code}: {_one_line(body)}"
                return _finish(rec, start, texts)
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                now = time.perf_counter()
                chunk = json.loads(data)
                if "error" in chunk:  # vLLM reports mid-stream failures as a data chunk
                    rec["error_code"] = "stream_error"
                    rec["error"] = _one_line(json.dumps(chunk["error"]))
                    break
                n_new = _chunk_tokens(chunk, cum_tokens, rec, ids, texts)
                usage = chunk.get("usage") or {}
                if "completion_tokens" in usage:
                    cum_tokens = max(cum_tokens, int(usage["completion_tokens"]))
                if not chunk.get("choices"):
                    _final_usage(chunk, rec)
                    continue
                if n_new <= 0:
                    continue
                rec["chunks"] = (rec.get("chunks") or 0) + 1
                if last_t is None:
                    rec["ttft_s"] = now - start
                    itl.extend([0.0] * (n_new - 1))
                else:
                    itl.extend([(now - last_t) / n_new] * n_new)
                last_t = now
    except (httpx.HTTPError, json.JSONDecodeError, OSError) as exc:
        rec["error_code"] = type(exc).__name__
        rec["error"] = f"{type(exc).__name__}: {_one_line(str(exc)) or 'no detail'}"
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a chunk not shaped as OpenAI's
        rec["error_code"] = "bad_chunk"
        rec["error"] = f"malformed stream chunk ({type(exc).__name__}: {_one_line(str(exc))})"
    return _finish(rec, start, texts)


def _chunk_tokens(chunk: dict[str, Any], cum_tokens: int, rec: RequestRow, ids_out: list[int], texts: list[str]) -> int:
    """Tokens this chunk carries: its token_ids (added to ``ids_out``), else the continuous-usage
    delta, else 1 if text."""
    n = 0
    counted = False
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content"):
            texts.append(delta["content"])
        ids = choice.get("token_ids")
        if ids is not None:
            ids_out.extend(ids)
            n += len(ids)
            counted = True
        if choice.get("finish_reason"):
            rec["finish_reason"] = choice["finish_reason"]
    if counted:
        return n
    usage = chunk.get("usage") or {}
    if "completion_tokens" in usage and chunk.get("choices"):
        return int(usage["completion_tokens"]) - cum_tokens
    if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
        rec["itl_method"] = "per_chunk"
        return 1
    return 0


def _final_usage(chunk: dict[str, Any], rec: RequestRow) -> None:
    usage = chunk.get("usage") or {}
    if "completion_tokens" in usage:
        rec["output_tokens"] = int(usage["completion_tokens"])
    if "prompt_tokens" in usage:
        rec["input_tokens"] = int(usage["prompt_tokens"])
    spec = (chunk.get("metrics") or {}).get("speculative_decoding")
    if spec:
        # vLLM calls this object experimental: a changed shape loses this request's acceptance
        # (the cell still has the exact /metrics diff), not the request or the run.
        try:
            rec["spec_decode"] = spec_counts(spec)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            rec["spec_decode"] = None
            rec["spec_decode_error"] = f"unreadable metrics.speculative_decoding ({type(exc).__name__}: {exc})"


def spec_counts(sd: dict[str, Any]) -> dict[str, Any]:
    """Canonical counts from vLLM's per-request ``metrics.speculative_decoding`` object."""
    hist = [int(x) for x in sd["acceptance_histogram"]]
    k = int(sd.get("num_spec_tokens", len(hist) - 1))
    per_pos = [sum(hist[j] for j in range(i + 1, len(hist))) for i in range(k)]
    out = {
        "num_spec_tokens": k,
        "num_drafts": int(sd["num_spec_steps"]),
        "draft_tokens": int(sd["num_draft_tokens"]),
        "accepted_tokens": int(sd["num_accepted_draft_tokens"]),
        "accepted_per_position": per_pos,
        "acceptance_histogram": hist,
    }
    for key in ("per_step_accepted", "per_step_drafted"):
        if sd.get(key) is not None:
            out[key] = list(sd[key])
    return out


def _finish(rec: RequestRow, start: float, texts: list[str]) -> RequestRow:
    rec["e2e_s"] = time.perf_counter() - start
    rec["text"] = "".join(texts)
    if rec["output_tokens"] is None and rec["error"] is None:
        rec["output_tokens"] = len(rec.get("itl_s") or []) + (1 if rec["ttft_s"] is not None else 0)
    return rec


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def write_outputs(result: LoadResult, out_dir: Path, name: str | None = None) -> None:
    """Write ``requests.jsonl`` and ``summary.json`` (llmperf's key names) into ``out_dir``."""
    out_dir = Path(out_dir)
    rows = cast(list[dict[str, Any]], result.requests)  # a RequestRow is a plain dict
    write_jsonl(out_dir / "requests.jsonl", rows)
    save_json(
        out_dir / "summary.json",
        summarize(
            rows,
            result.duration_s,
            model=result.model,
            concurrency=result.sent.concurrency,
            name=name or f"{os.path.basename(result.model.rstrip('/')) or 'model'}_summary",
            max_tokens=result.sent.max_tokens,
            extra=_summary_extra(result.sent),
        ),
    )


def _summary_extra(sent: LoadSent) -> dict[str, Any] | None:
    if sent.summary_extra is None:
        return None
    acc = {} if sent.accounting is None else {"specbench_llmperf_accounting": sent.accounting.dump()}
    return {**sent.summary_extra, **acc}

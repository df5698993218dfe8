"""Adapter for a user's ray-project/llmperf checkout, run as a subprocess in its own venv.

llmperf is not on PyPI (the PyPI name is an unrelated stub), pins pydantic < 2.5 (clashes with
vLLM) and loads a Llama tokenizer from the Hugging Face hub at import, so it runs from the user's
clone with the ``python`` of its own venv: ``token_benchmark_ray.py --llm-api openai`` with
``OPENAI_API_BASE=<url>/v1``. Its ``*_individual_responses.json`` becomes our request records,
so the rest of specbench treats both load generators alike.

What llmperf cannot give: per-token inter-token latencies (it records one value per request, total
time over chunks, under ``llmperf_inter_token_latency_s``; ``itl_s`` is None), per-request
acceptance (``spec_decode`` is None: use the /metrics diff), the generated text and token ids, and
the server's token counts (its counts come from its own tokenizer).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from specbench.errors import InputError, SpecbenchError
from specbench.io import read_text
from specbench.load import llmperf_account as account
from specbench.load.driver import LoadResult, LoadSent
from specbench.load.llmperf_checks import (  # noqa: F401
    KILL_GRACE_S,
    OBSERVER,
    SCRIPT,
    check_llmperf,
    check_tokenizer,
    default_input_tokens,
    llmperf_env,
    start_in_checkout,
)
from specbench.records.cell import LoadAccounting
from specbench.records.requests import RequestRow
from specbench.serve.procs import join_started, kill_tree

REQUEST_TIMEOUT_S = 180  # llmperf's per-request timeout, fixed in its OpenAI client (requests.post)
STARTUP_GRACE_S = 300  # Ray start-up, tokenizer load and prompt building before the test clock starts


@dataclass
class LlmperfArgs:
    path: Path  # the llmperf checkout (holds token_benchmark_ray.py); "~" expanded
    python: str  # its venv's interpreter; "~" expanded
    mean_input_tokens: int = 550
    stddev_input_tokens: int = 0
    mean_output_tokens: int = 150
    stddev_output_tokens: int = 0
    num_concurrent_requests: int = 1
    max_num_completed_requests: int = 10
    # llmperf's --timeout: the WHOLE test (its per-request timeout is fixed at 180 s in its source).
    test_timeout_s: int = 600
    additional_sampling_params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0})
    extra_args: list[str] = field(default_factory=list)
    api_key: str | None = None  # the server's --api-key; passed as OPENAI_API_KEY, never written out

    def __post_init__(self) -> None:
        self.path = Path(os.path.expanduser(str(self.path)))
        self.python = os.path.expanduser(self.python)

    @property
    def wall_limit_s(self) -> float:
        """The llmperf process's wall-clock limit: its test time, plus Ray and tokenizer start-up and
        one last request that may run its full 180 s past the test time."""
        return self.test_timeout_s + STARTUP_GRACE_S + REQUEST_TIMEOUT_S


def results_name(model: str, mean_input_tokens: int, mean_output_tokens: int) -> str:
    """The file stem llmperf gives its results (``meta-llama-Llama-3-1-8B-Instruct_100_30``)."""
    stem = re.sub(r"[^\w\d-]+", "-", model)
    stem = re.sub(r"-{2,}", "-", stem)
    return f"{stem}_{mean_input_tokens}_{mean_output_tokens}"


def llmperf_argv(model: str, spec: LlmperfArgs, results_dir: Path) -> list[str]:
    return [
        spec.python,
        str(Path(spec.path) / SCRIPT),
        "--model",
        model,
        "--llm-api",
        "openai",
        "--mean-input-tokens",
        str(spec.mean_input_tokens),
        "--stddev-input-tokens",
        str(spec.stddev_input_tokens),
        "--mean-output-tokens",
        str(spec.mean_output_tokens),
        "--stddev-output-tokens",
        str(spec.stddev_output_tokens),
        "--num-concurrent-requests",
        str(spec.num_concurrent_requests),
        "--max-num-completed-requests",
        str(spec.max_num_completed_requests),
        "--timeout",
        str(spec.test_timeout_s),
        "--additional-sampling-params",
        json.dumps(spec.additional_sampling_params),
        "--results-dir",
        str(results_dir),
        *spec.extra_args,
    ]


def llmperf_args(
    load: Any, n: int, server_args: list[str], api_key: str | None = None, warmup: bool = False
) -> LlmperfArgs:
    """The llmperf arguments for ``n`` requests of a study's ``load`` (config.Load) on a server run with ``server_args``.

    A warmup runs one thread: llmperf then sends exactly ``n`` (each extra thread may send one
    request past the count).
    """
    lp = load.llmperf
    conc = 1 if warmup else load.concurrency
    timeout = lp.test_timeout_s if lp.test_timeout_s and not warmup else math.ceil(n / conc) * REQUEST_TIMEOUT_S
    return LlmperfArgs(
        path=Path(lp.path),
        python=lp.python or "python",
        mean_input_tokens=lp.mean_input_tokens or default_input_tokens(server_args, load.max_tokens),
        mean_output_tokens=load.max_tokens,
        num_concurrent_requests=conc,
        max_num_completed_requests=n,
        test_timeout_s=int(timeout),
        additional_sampling_params={"temperature": load.temperature},
        extra_args=list(lp.extra_args),
        api_key=api_key,
    )


def run_llmperf(
    base_url: str,
    model: str,
    spec: LlmperfArgs,
    results_dir: Path,
    log_path: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    scrape: Callable[[], str | None] | None = None,
    poll_s: float = 0.5,
    check_tokenizer_s: float | None = 120.0,
) -> LoadResult:
    """Run llmperf against ``base_url``, read its results and reconcile them with the server.

    ``scrape`` returns the server's /metrics text (default: GET ``<base_url>/metrics``); it is read
    before, during (every ``poll_s``) and after the run. Requests llmperf did not record become
    failed records (see :mod:`specbench.load.llmperf_account`). SpecbenchError when nothing can be
    reconciled (llmperf failed before any request reached the server) or it ran past its limit.
    """
    check_llmperf(spec.path, spec.python)
    ray_tmp = tempfile.mkdtemp(prefix="sb-lp-", dir="/tmp" if os.path.isdir("/tmp") else None)
    try:
        env = llmperf_env(spec, base_url, ray_tmp)
        if check_tokenizer_s:
            check_tokenizer(spec, env, check_tokenizer_s)
        return _run(base_url, model, spec, results_dir, env, log_path, progress, scrape, poll_s)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _run(
    base_url: str,
    model: str,
    spec: LlmperfArgs,
    results_dir: Path,
    env: dict[str, str],
    log_path: Path | None,
    progress: Callable[[int, int], None] | None,
    scrape: Callable[[], str | None] | None,
    poll_s: float,
) -> LoadResult:
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    scrape = scrape or _scraper(base_url)
    before = account.server_counts(_safe(scrape))
    span = account.ServerSpan(before)
    log_path = Path(log_path) if log_path else results_dir / "llmperf.log"
    n = spec.max_num_completed_requests
    t0 = time.monotonic()
    code = _watch(model, spec, results_dir, env, log_path, progress, scrape, span, poll_s, t0)
    after = account.server_counts(_safe(scrape))
    span.observe(time.monotonic(), after)
    log_text = log_path.read_text(encoding="utf-8", errors="replace")
    name = results_name(model, spec.mean_input_tokens, spec.mean_output_tokens)
    have_files = (results_dir / f"{name}_summary.json").is_file()
    server = account.diff_server(before, after)
    if code != 0 and not (server and server["sent"]):
        msgs = account.error_lines(log_text)
        raise SpecbenchError(
            f"llmperf exited with status {code}"
            + (f": {'; '.join(msgs)[:300]}" if msgs else "")
            + f" (log {log_path}, last lines below)\n"
            + "\n".join(log_text.splitlines()[-30:])
        )
    if have_files:
        result = read_llmperf_results(results_dir, name)
    else:
        result = _no_results(model, spec, name, time.monotonic() - t0)
    started = result.sent.llmperf_started
    new, acc = account.reconcile(
        n,
        result.requests,
        server,
        log_text,
        started=started,
        timed_out="Test timed out before all requests" in log_text,
    )
    acc["llmperf_exit_status"] = code
    result.requests.extend(new)
    llmperf_tps = result.sent.llmperf_output_tok_per_s
    server_s = span.seconds
    acc["server_span_s"] = round(server_s, 3) if server_s else None
    acc["server_span_resolution_s"] = poll_s
    result.sent = replace(
        result.sent,
        accounting=LoadAccounting.model_validate(acc),
        summary_extra=_summary_extra(server, server_s, llmperf_tps),
    )
    return result


def _watch(
    model: str,
    spec: LlmperfArgs,
    results_dir: Path,
    env: dict[str, str],
    log_path: Path,
    progress: Callable[[int, int], None] | None,
    scrape: Callable[[], str | None],
    span: account.ServerSpan,
    poll_s: float,
    t0: float,
) -> int:
    """Run llmperf to its end, its output copied to ``log_path`` and the server scraped into
    ``span`` every ``poll_s``; its exit status. Killed (SpecbenchError) past its wall-clock limit."""
    with open(log_path, "w", encoding="utf-8", buffering=1) as log:
        proc = start_in_checkout(llmperf_argv(model, spec, results_dir), spec.path, env)
        reader = threading.Thread(
            target=_pump, args=(proc, log, spec.max_num_completed_requests, progress), daemon=True
        )
        try:
            reader.start()  # inside the try: a Ctrl-C here must still kill llmperf's process group
            while True:
                try:
                    code = proc.wait(timeout=poll_s)
                    break
                except subprocess.TimeoutExpired:
                    span.observe(time.monotonic(), account.server_counts(_safe(scrape)))
                if time.monotonic() - t0 > spec.wall_limit_s:
                    kill_tree(proc, grace_s=KILL_GRACE_S)
                    raise SpecbenchError(
                        f"llmperf ran past its wall-clock limit ({spec.wall_limit_s:.0f} s = test_timeout_s "
                        f"{spec.test_timeout_s} + start-up and last-request grace) and was killed; log {log_path}"
                    )
        finally:
            # Also after a clean exit: Ray's workers may outlive llmperf's driver (and hold the pipe).
            kill_tree(proc, grace_s=KILL_GRACE_S)
            join_started(reader, timeout=10)
    return code


def _no_results(model: str, spec: LlmperfArgs, name: str, duration_s: float) -> LoadResult:
    """What a run that wrote no result files gives: no request records, only what was asked."""
    return LoadResult(
        requests=[],
        started_at="",
        duration_s=duration_s,
        model=model,
        sent=LoadSent(
            load_generator="llmperf",
            concurrency=spec.num_concurrent_requests,
            max_tokens=spec.mean_output_tokens,
            llmperf_name=name,
        ),
    )


def _summary_extra(
    server: dict[str, Any] | None, server_s: float | None, llmperf_tps: Any
) -> dict[str, str | float | None]:
    """summary.json's llmperf labels and server-true throughput (driver.write_outputs adds the accounting)."""
    return {
        "specbench_load_driver": "llmperf",
        "specbench_itl_method": "llmperf_per_chunk",
        "specbench_itl_definition": "llmperf's: a request's total chunk time / its number of chunks (not per token)",
        "specbench_output_tok_per_s": (server["generation_tokens"] / server_s if server and server_s else None),
        "specbench_output_tok_per_s_definition": (
            "server-generated tokens (/metrics diff) / the server's busy span for the load"
        ),
        "llmperf_output_tok_per_s": llmperf_tps,
    }


def _pump(proc: subprocess.Popen, log, total: int, progress: Callable[[int, int], None] | None) -> None:
    """Copy llmperf's output to the log; report tqdm's "k/n" progress (it redraws with \\r)."""
    assert proc.stdout is not None
    buf, last = b"", None
    while True:
        chunk = proc.stdout.read1(4096) if hasattr(proc.stdout, "read1") else proc.stdout.read(4096)
        if not chunk:
            break
        log.write(chunk.decode("utf-8", errors="replace"))
        buf = (buf + chunk)[-4096:]
        if progress:
            hits = _TQDM.findall(buf.decode("utf-8", errors="replace"))
            if hits:
                done, of = hits[-1]
                if int(of) == total and int(done) != last:
                    last = int(done)
                    progress(last, total)


_TQDM = re.compile(r"\|\s*(\d+)/(\d+) \[")


def _scraper(base_url: str) -> Callable[[], str | None]:
    url = base_url.rstrip("/") + "/metrics"

    def scrape() -> str | None:
        import httpx

        return httpx.get(url, timeout=5.0).text

    return scrape


def _safe(scrape: Callable[[], str | None]) -> str | None:
    try:
        return scrape()
    except Exception:  # noqa: BLE001 - a missed scrape loses the reconciliation, not the load
        return None


def read_llmperf_results(results_dir: Path, name: str | None = None) -> LoadResult:
    """Read ``<name>_summary.json`` and ``<name>_individual_responses.json`` into a LoadResult.

    With ``name`` None the directory must hold exactly one llmperf result pair.
    """
    results_dir = Path(results_dir)
    if name is None:
        found = sorted(p.name[: -len("_summary.json")] for p in results_dir.glob("*_summary.json"))
        if len(found) != 1:
            raise InputError(f"{results_dir}: expected one llmperf *_summary.json, found {len(found)}; name the run")
        name = found[0]
    summary = _read_json(results_dir / f"{name}_summary.json", dict)
    rows = _read_json(results_dir / f"{name}_individual_responses.json", list)
    requests = [_request(i, row, results_dir / f"{name}_individual_responses.json") for i, row in enumerate(rows)]
    completed = summary.get("results_num_completed_requests")
    per_min = summary.get("results_num_completed_requests_per_min")
    # llmperf does not save its duration; it is implied by its completed-per-minute rate.
    duration = float(completed) * 60.0 / float(per_min) if completed and per_min else 0.0
    ts = summary.get("timestamp")
    started = (
        _dt.datetime.fromtimestamp(float(ts) - duration, _dt.timezone.utc).isoformat(timespec="seconds") if ts else ""
    )
    return LoadResult(
        requests=requests,
        started_at=started,
        duration_s=duration,
        model=str(summary.get("model", "")),
        base_url="",
        sent=LoadSent(
            load_generator="llmperf",
            concurrency=summary.get("num_concurrent_requests"),
            mean_input_tokens=summary.get("mean_input_tokens"),
            max_tokens=summary.get("mean_output_tokens"),
            llmperf_name=name,
            llmperf_started=summary.get("results_num_requests_started"),
            llmperf_output_tok_per_s=summary.get("results_mean_output_throughput_token_per_s"),
        ),
    )


def _read_json(path: Path, kind: type) -> Any:

    text = read_text(path, "llmperf result file", missing="was llmperf run with --results-dir here?")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: not a readable llmperf JSON file ({exc})") from None
    if not isinstance(data, kind):
        raise InputError(f"{path}: expected a JSON {kind.__name__}, got {type(data).__name__}")
    return data


def _request(i: int, row: Any, path: Path) -> RequestRow:
    if not isinstance(row, dict) or "end_to_end_latency_s" not in row:
        raise InputError(f"{path}: entry {i} is not an llmperf response (no end_to_end_latency_s)")
    failed = row.get("error_code") is not None or bool(row.get("error_msg"))
    return {
        "id": i,
        "prompt_id": None,
        "category": "llmperf",
        "start_s": None,
        "ttft_s": _float(row.get("ttft_s")),
        "itl_s": None,
        "e2e_s": _float(row.get("end_to_end_latency_s")),
        "llmperf_inter_token_latency_s": _float(row.get("inter_token_latency_s")),
        "output_tokens": _int(row.get("number_output_tokens")),
        "input_tokens": _int(row.get("number_input_tokens")),
        "chunks": None,
        "text": None,
        "token_ids": None,
        "finish_reason": None,
        "itl_method": "llmperf_per_chunk",
        "error": (row.get("error_msg") or f"error {row.get('error_code')}") if failed else None,
        "error_code": row.get("error_code") if failed else None,
        "spec_decode": None,
    }


def _float(x: Any) -> float | None:
    try:
        return None if x is None else float(x)
    except (TypeError, ValueError):
        return None


def _int(x: Any) -> int | None:
    f = _float(x)
    return None if f is None or f != f else int(f)

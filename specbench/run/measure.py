"""Measure one cell on a running, attested server (the middle of run/lifecycle.py's cell life).

warmup -> wait until the warmup's log windows are printed -> scrape /metrics (before) -> load ->
wait until the log windows since 'before' add up to the /metrics diff -> scrape (after) -> collect.
vLLM prints a SpecDecoding window only at its next stats tick, so without the first wait a window
would straddle the load's start, and without the second the last window would be missing. Every
executor measures through :func:`measure_cell`; a step that cannot give a measurement raises
:class:`~specbench.run.lifecycle.CellFailed`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from specbench.analysis.rates import total
from specbench.io import atomic_write_text
from specbench.load.driver import LoadPlan, LoadResult, run_load, write_outputs
from specbench.load.llmperf import llmperf_args, run_llmperf
from specbench.load.precision import precision_load
from specbench.records.cell import LogWindowWait, PairedBaseline, Precision
from specbench.records.counts import Counts
from specbench.records.files import NO_SPEC_COUNTS, Acceptance, CellRecord
from specbench.records.requests import RequestRecord, requests_of
from specbench.redact import server_api_key
from specbench.run import collect
from specbench.run.cells import Cell
from specbench.run.interleave import PAIRED_DIR, interleaved_load
from specbench.run.lifecycle import CellFailed, RunContext, log_lines
from specbench.serve.server import VLLMServer


def _same_totals(a: Counts | None, b: Counts | None) -> bool:
    # Log windows print token counts exactly; positions come from 3-decimal rates, so the wait
    # compares the exact fields only (the agreement check compares all of them).
    za = (a.draft_tokens, a.accepted_tokens) if a is not None else (0, 0)
    zb = (b.draft_tokens, b.accepted_tokens) if b is not None else (0, 0)
    return za == zb


def wait_log_matches(
    server: Any, log_path: Path, after_line: int, baseline_prom: Counts | None, timeout_s: float, poll_s: float = 0.25
) -> tuple[str, Counts | None, list[Counts], list[str], bool]:
    """Poll /metrics and the log until the windows after ``after_line`` sum to the /metrics diff.

    ``server``: anything with ``scrape_metrics()`` and ``is_alive()`` (a VLLMServer).
    Returns (last scrape text, its counts, windows, window warnings, matched)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = server.scrape_metrics()
        prom = collect.diff_counts(collect.prometheus_counts(text), baseline_prom)
        log_text, _ = log_lines(log_path)
        windows, warns = collect.log_windows(log_text, after_line, file=str(log_path))
        if _same_totals(total(windows), prom):
            return text, prom, windows, warns, True
        if time.monotonic() > deadline:
            return text, prom, windows, warns, False
        if not server.is_alive():
            raise CellFailed("server died while waiting for its stats log")
        time.sleep(poll_s)


def measure_cell(
    cell: Cell, ctx: RunContext, server: VLLMServer, d: Path, log_path: Path, wait_s: float, record: CellRecord
) -> Acceptance:
    """Load the cell's server and collect its acceptance; the load's files go to ``d``, timings and
    notes to ``record``. Raises CellFailed when the result cannot be a measurement."""
    ld = ctx.study.load
    model = cell.model
    assert model is not None, "cells.expand() names every cell's model"
    key = server_api_key(cell.args, cell.env)  # a server started with --api-key refuses keyless load
    before_prom, before_line = _warmup_and_before(cell, ctx, server, model, key, d, log_path, wait_s)

    # load.interleave: the baseline's server, started (once) before this cell's load begins
    companion = ctx.companion(cell) if ctx.companion is not None and not cell.is_baseline else None
    if companion is not None:
        record.paired_baseline = PairedBaseline.model_validate(companion[2])
    # A baseline has no acceptance to steer on: it sends the cap as a fixed load.
    n = ld.max_requests if ld.until is not None and ld.max_requests is not None else ld.num_requests
    ctx.display.update(cell.cell_id, "load", done=0, total=n)
    t0 = time.monotonic()
    result = _send_load(cell, ctx, server, model, key, n, d, companion, record)
    record.timings.load_s = round(time.monotonic() - t0, 2)
    covers = result.sent.accounting  # llmperf: requests asked / recorded / failed / seen by the server
    if covers is not None:
        record.load_accounting = covers
    write_outputs(result, d)
    requests = requests_of(result.requests, d / "requests.jsonl")
    _check_load(server, requests, ld.max_error_rate)

    ctx.display.update(cell.cell_id, "collecting")
    t0 = time.monotonic()
    acc = _collect(cell, ctx, server, log_path, wait_s, d, record, before_prom, before_line, requests)
    if covers is not None and covers.acceptance_covers and (covers.server_not_recorded or covers.failed):
        # llmperf: the /metrics counts cover requests that requests.jsonl does not time.
        acc.warnings = [*acc.warnings, covers.acceptance_covers]
    record.timings.collect_s = round(time.monotonic() - t0, 2)
    return acc


def _warmup_and_before(
    cell: Cell,
    ctx: RunContext,
    server: VLLMServer,
    model: str,
    key: str | None,
    d: Path,
    log_path: Path,
    wait_s: float,
) -> tuple[Counts | None, int]:
    """Warm the server up and take 'before': its /metrics counts and the log line it stands at."""
    ld = ctx.study.load
    if ld.warmup_requests:
        ctx.display.update(cell.cell_id, "warmup")
        _load(
            ctx,
            server.url,
            model,
            ld.warmup_requests,
            progress=None,
            out_dir=d / "llmperf-warmup",
            api_key=key,
            cell=cell,
            warmup=True,
        )
    # The warmup's windows must be printed (and so excluded) before 'before' is taken.
    before_text, before_prom, warm_windows, _, ok = wait_log_matches(server, log_path, 0, None, wait_s)
    _, before_line = log_lines(log_path)
    atomic_write_text(d / "metrics_before.prom", before_text)
    if not ok and not cell.is_baseline:
        raise CellFailed(f"warmup stats never appeared in the log within {wait_s:.0f} s")
    return before_prom, before_line


def _send_load(
    cell: Cell,
    ctx: RunContext,
    server: VLLMServer,
    model: str,
    key: str | None,
    n: int,
    d: Path,
    companion: tuple | None,
    record: CellRecord,
) -> LoadResult:
    ld = ctx.study.load
    if ld.until is not None and not cell.is_baseline:
        result, outcome = precision_load(
            ld,
            lambda start, k: _load(
                ctx,
                server.url,
                model,
                k,
                out_dir=d / "llmperf",
                api_key=key,
                cell=cell,
                start=start,
                progress=lambda j, *_: ctx.display.update(cell.cell_id, "load", done=start + j, total=n),
            ),
            scrape=lambda: collect.prometheus_counts(server.scrape_metrics()),
        )
        record.precision = Precision.model_validate(outcome)
        return result
    if companion is not None and companion[0] is not None:
        return _interleaved(ctx, cell, server.url, key, n, d, companion, record)
    return _load(
        ctx,
        server.url,
        model,
        n,
        progress=lambda k, *_: ctx.display.update(cell.cell_id, "load", done=k, total=n),
        out_dir=d / "llmperf",
        api_key=key,
        cell=cell,
    )


def _check_load(server: VLLMServer, requests: list[RequestRecord], max_error_rate: float) -> None:
    errors = [r.error for r in requests if r.error]
    if not server.is_alive():
        raise CellFailed("vLLM server died during the load")
    if len(errors) > max_error_rate * len(requests):
        raise CellFailed(
            f"{len(errors)}/{len(requests)} requests failed (max_error_rate "
            f"{max_error_rate}); first error: {str(errors[0])[:200]}"
        )


def _collect(
    cell: Cell,
    ctx: RunContext,
    server: VLLMServer,
    log_path: Path,
    wait_s: float,
    d: Path,
    record: CellRecord,
    before_prom: Counts | None,
    before_line: int,
    requests: list[RequestRecord],
) -> Acceptance:
    """The cell's acceptance from the log windows and /metrics counts after 'before'."""
    after_text, prom, windows, warns, matched = wait_log_matches(server, log_path, before_line, before_prom, wait_s)
    record.log_window_wait = LogWindowWait(matched=matched, timeout_s=wait_s, after_line=before_line)
    atomic_write_text(d / "metrics_after.prom", after_text)
    if cell.is_baseline:
        return collect.baseline_acceptance(before_prom, collect.prometheus_counts(after_text), windows)
    acc = collect.build_acceptance(
        num_spec_tokens=cell.k,
        prom=prom,
        windows=windows,
        window_warnings=warns,
        req_units=collect.request_units(requests),
        per_request_mode=ctx.study.serve.per_request_metrics,
    )
    if not prom or not prom.num_drafts:
        raise CellFailed(NO_SPEC_COUNTS)
    reset = collect.reset_problem(prom)
    if reset:
        raise CellFailed(reset)
    return acc


def warm_up(ctx: RunContext, url: str, cell: Cell) -> None:
    """The study's warmup requests to a server that serves ``cell`` (a companion, run/interleave.py)."""
    if ctx.study.load.warmup_requests:
        assert cell.model is not None
        _load(
            ctx,
            url,
            cell.model,
            ctx.study.load.warmup_requests,
            progress=None,
            out_dir=ctx.run_dir,  # unused by the built-in driver, the only one interleave allows
            api_key=server_api_key(cell.args, cell.env),
            cell=cell,
            warmup=True,
        )


def _interleaved(
    ctx: RunContext, cell: Cell, url: str, key: str | None, n: int, d: Path, companion: tuple, record: CellRecord
) -> LoadResult:
    """The cell's load alternating with the same requests on its baseline's server
    (run/interleave.py); the baseline side goes to ``d/paired_baseline``."""
    server, base, info = companion
    model, base_model = cell.model, base.model
    assert model is not None and base_model is not None
    done = [0]

    def send_cell(start: int, k: int) -> LoadResult:
        res = _load(ctx, url, model, k, progress=None, out_dir=d, api_key=key, cell=cell, start=start)
        done[0] += k
        ctx.display.update(cell.cell_id, "load", done=done[0], total=n)
        return res

    def send_base(start: int, k: int) -> LoadResult:
        key_b = server_api_key(base.args, base.env)
        return _load(ctx, server.url, base_model, k, progress=None, out_dir=d, api_key=key_b, cell=base, start=start)

    result, base_result, blocks = interleaved_load(n, ctx.study.load.interleave, send_cell, send_base)
    write_outputs(base_result, d / PAIRED_DIR)
    failed = sum(1 for r in base_result.requests if r.get("error"))
    paired = {**info, **blocks, "requests": len(base_result.requests), "failed": failed}
    if not server.is_alive():
        paired["error"] = "the baseline's server died during the load"
    record.paired_baseline = PairedBaseline.model_validate(paired)
    return result


def _load(
    ctx: RunContext,
    url: str,
    model: str,
    n: int,
    progress: Callable[..., None] | None,
    out_dir: Path,
    api_key: str | None = None,
    cell: Cell | None = None,
    warmup: bool = False,
    start: int = 0,
) -> LoadResult:
    ld = ctx.study.load
    if ld.driver == "llmperf":
        spec = llmperf_args(ld, n, cell.args if cell else [], api_key=api_key, warmup=warmup)
        return run_llmperf(url, model, spec, out_dir, progress=progress)
    return run_load(url, model, ctx.prompts, _load_plan(ld, n, api_key), progress=progress, start=start)


def _load_plan(ld: Any, n: int, api_key: str | None = None) -> LoadPlan:
    return LoadPlan(
        num_requests=n,
        concurrency=ld.concurrency,
        max_tokens=ld.max_tokens,
        temperature=ld.temperature,
        seed=ld.seed,
        timeout_s=ld.timeout_s,
        api_key=api_key,
        output_len=ld.output_len,
    )

"""Run a study: cells one after another (local executor), saving the run directory after every cell.

Per cell: start vLLM -> warmup -> wait until the warmup's log windows are printed -> scrape
/metrics (before) -> load -> wait until the log windows since 'before' add up to the /metrics
diff -> scrape (after) -> stop -> collect. vLLM prints a SpecDecoding window only at its next
stats tick, so without the first wait a window would straddle the load's start, and without the
second the last window would be missing. A failed cell (server dies, never healthy, load errors
above the threshold) is recorded and the run goes on. Exit codes: 0 all cells done, 3 some
failed, 130 interrupted (Ctrl-C: the server is stopped and finished cells are kept).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol

from specbench import redact
from specbench.analysis.counts import total
from specbench.config import Study
from specbench.errors import EXIT_FAILED_CELLS as EXIT_SOME_FAILED
from specbench.errors import EXIT_OK, ConfigError, DependencyError, ServerError, SpecbenchError
from specbench.records import Acceptance, CellRecord, Timings, as_record, load, requests_of
from specbench.run import collect, store, timings
from specbench.run.cells import Cell

WAIT_EXTRA_S = 15.0  # beyond three stats intervals, for a slow machine


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class CellFailed(Exception):
    def __init__(self, reason: str, exit_status: int | None = None):
        super().__init__(reason)
        self.reason, self.exit_status = reason, exit_status


class Display(Protocol):
    def start(self, cells: list[Cell]) -> None: ...
    def update(self, cell_id: str, state: str, **info: Any) -> None: ...
    def finish(self, run_dir: Path, records: list[CellRecord]) -> None: ...
    def close(self) -> None: ...


@dataclass
class RunContext:
    study: Study
    run_dir: Path
    prompts: list
    display: Display
    python: str | None = None
    # cell id -> node that ran it (the manifest's cell_hosts), for executors that run cells remotely
    cell_hosts: dict[str, str] = field(default_factory=dict)
    # shared servers that could not switch their head in place (the manifest's head_switch_fallbacks)
    switch_fallbacks: list[dict[str, Any]] = field(default_factory=list)


class Executor(Protocol):
    """Runs one cell and returns (cell record, acceptance record or None). An executor that runs
    cells concurrently (ray_executor.RayExecutor) also has ``run_cells(cells, ctx)``, yielding
    them as they finish; execute() closes that generator on Ctrl-C so it can cancel its tasks."""

    def run_cell(self, cell: Cell, ctx: RunContext) -> tuple[CellRecord, Acceptance | None]: ...


def _log_lines(path: Path) -> tuple[str, int]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "", 0
    return text, text.count("\n")


def _same_totals(a, b) -> bool:
    # Log windows print token counts exactly; positions come from 3-decimal rates, so the wait
    # compares the exact fields only (the agreement check compares all of them).
    za = (a.draft_tokens, a.accepted_tokens) if a is not None else (0, 0)
    zb = (b.draft_tokens, b.accepted_tokens) if b is not None else (0, 0)
    return za == zb


def wait_log_matches(
    server, log_path: Path, after_line: int, baseline_prom, timeout_s: float, poll_s: float = 0.25
) -> tuple[str, Any, list, list[str], bool]:
    """Poll /metrics and the log until the windows after ``after_line`` sum to the /metrics diff.

    Returns (last scrape text, its counts, windows, window warnings, matched)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = server.scrape_metrics()
        prom = collect.diff_counts(collect.prometheus_counts(text), baseline_prom)
        log_text, _ = _log_lines(log_path)
        windows, warns = collect.log_windows(log_text, after_line, file=str(log_path))
        if _same_totals(total(windows), prom):
            return text, prom, windows, warns, True
        if time.monotonic() > deadline:
            return text, prom, windows, warns, False
        if not server.is_alive():
            raise CellFailed("server died while waiting for its stats log")
        time.sleep(poll_s)


def new_record(cell: Cell, study: Study) -> CellRecord:
    """cell.json's record for a cell that has not finished (yet): status failed, no results."""
    from specbench.redact import redact_env

    return CellRecord(
        cell_id=cell.cell_id,
        axes=cell.axes,
        repeat=cell.repeat,
        is_baseline=cell.is_baseline,
        status="failed",
        reason=None,
        exit_status=None,
        log_tail=None,
        argv=None,
        env=redact_env(cell.env),
        host=study.serve.host,
        port=None,
        vllm_version=None,
        started_at=utc_now(),
        ended_at=None,
        timings=Timings(startup_s=None, load_s=None, collect_s=None),
        log_window_wait=None,
        spec=cell.spec,
    )


def attest_cell(cell: Cell, record: CellRecord, log_path: Path, switched: list | None = None) -> None:
    """Record what vLLM says it runs for ``cell`` (its server log so far, and the workers' answers to
    an in-place head switch) and fail the cell where that contradicts what the cell asks for."""
    from specbench.attest import attest, mismatches

    text, _ = _log_lines(log_path)
    record.attested = attest(text, switched)
    wrong = mismatches(cell.spec, record.attested)
    if wrong:
        raise CellFailed("attestation: " + "; ".join(wrong))


def close_record(record: CellRecord, server, secrets) -> None:
    """What every cell's record gets when its part on ``server`` ends: the pid, the end time and,
    if it failed, the (scrubbed) log tail and the server's exit status."""
    record.pid = server.pid
    if record.status != "done":
        record.log_tail = redact.scrub_text(server.log_tail(), secrets) or None
        if record.exit_status is None:
            record.exit_status = server.exit_status
    record.ended_at = utc_now()


class LocalExecutor:
    """Cells one after another on this machine."""

    def run_cell(self, cell: Cell, ctx: RunContext) -> tuple[CellRecord, Acceptance | None]:
        from specbench.redact import redact_argv
        from specbench.server import VLLMServer

        study, serve = ctx.study, ctx.study.serve
        d = store.cell_dir(ctx.run_dir, cell.cell_id)
        # A resumed cell starts clean: an earlier attempt's requests or summary must not end up in
        # this attempt's row. Until this attempt writes cell.json, --resume sees the cell as missing.
        _remove_tree(d)
        d.mkdir(parents=True, exist_ok=True)
        log_path = d / "server.log"
        interval = serve.log_stats_interval_s
        wait_s = 3 * interval + WAIT_EXTRA_S
        record = new_record(cell, study)
        kwargs = {"python": ctx.python} if ctx.python else {}
        state_dir = _short_state_dir()
        server = VLLMServer(
            cell.args,
            cell.env,
            log_path,
            host=serve.host,
            port=serve.port,
            startup_timeout_s=serve.startup_timeout_s,
            state_dir=state_dir,
            **kwargs,
        )
        acc: Acceptance | None = None
        secrets = redact.secret_values(cell.env, cell.args, include_process_env=True)  # servers inherit os.environ
        try:
            ctx.display.update(cell.cell_id, "starting")
            t0 = time.monotonic()
            try:
                server.start()
            finally:
                if server.port is not None:  # known once start() picked it
                    record.port = server.port
                    record.argv = redact_argv(server.argv)
            record.timings.startup_s = round(time.monotonic() - t0, 2)
            record.vllm_version = server.vllm_version()
            attest_cell(cell, record, log_path)
            acc = self._measure(cell, ctx, server, d, log_path, wait_s, record)
            record.status = "done"
        except ServerError as exc:
            record.reason = str(exc).split("\n", 1)[0]
            record.exit_status = server.exit_status  # set when it exited during start-up
        except CellFailed as exc:
            record.reason, record.exit_status = exc.reason, exc.exit_status
        except SpecbenchError as exc:
            if isinstance(exc, (ConfigError, DependencyError)):
                raise  # would fail every cell alike: stop the run and say what to fix
            record.reason = str(exc).split("\n", 1)[0]
        except KeyboardInterrupt:
            record.reason = "interrupted (Ctrl-C)"
            raise
        finally:
            try:
                server.stop()  # a second Ctrl-C re-raises from here: still scrub and save below
            finally:
                self._finish(ctx, record, server, secrets, log_path, state_dir)
        return record, acc

    @staticmethod
    def _finish(ctx: RunContext, record: CellRecord, server, secrets, log_path: Path, state_dir: Path) -> None:
        close_record(record, server, secrets)
        redact.scrub_file(log_path, secrets)
        _remove_tree(state_dir)
        if record.status != "done":  # Ctrl-C included: save the cell as failed so --resume reruns it
            store.write_cell(ctx.run_dir, record, None)

    def _measure(
        self, cell: Cell, ctx: RunContext, server, d: Path, log_path: Path, wait_s: float, record: CellRecord
    ) -> Acceptance:
        from specbench.io import atomic_write_text

        study = ctx.study
        ld = study.load
        model = cell.model
        from specbench.redact import server_api_key

        key = server_api_key(cell.args, cell.env)  # a server started with --api-key refuses keyless load
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
        _, before_line = _log_lines(log_path)
        atomic_write_text(d / "metrics_before.prom", before_text)
        if not ok and not cell.is_baseline:
            raise CellFailed(f"warmup stats never appeared in the log within {wait_s:.0f} s")

        n = ld.num_requests if ld.until is None else ld.max_requests  # a baseline has no acceptance to steer on
        ctx.display.update(cell.cell_id, "load", done=0, total=n)
        t0 = time.monotonic()
        if ld.until is not None and not cell.is_baseline:
            from specbench.load.precision import precision_load

            result, record.precision = precision_load(
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
        else:
            result = _load(
                ctx,
                server.url,
                model,
                n,
                progress=lambda k, *_: ctx.display.update(cell.cell_id, "load", done=k, total=n),
                out_dir=d / "llmperf",
                api_key=key,
                cell=cell,
            )
        record.timings.load_s = round(time.monotonic() - t0, 2)
        if result.spec.get("accounting"):  # llmperf: requests asked / recorded / failed / seen by the server
            record.load_accounting = result.spec["accounting"]
        from specbench.load.driver import write_outputs

        write_outputs(result, d)
        requests = requests_of(result.requests, d / "requests.jsonl")
        errors = [r.error for r in requests if r.error]
        if not server.is_alive():
            raise CellFailed("vLLM server died during the load")
        if len(errors) > ld.max_error_rate * len(requests):
            raise CellFailed(
                f"{len(errors)}/{len(requests)} requests failed (max_error_rate "
                f"{ld.max_error_rate}); first error: {str(errors[0])[:200]}"
            )

        ctx.display.update(cell.cell_id, "collecting")
        t0 = time.monotonic()
        after_text, prom, windows, warns, matched = wait_log_matches(server, log_path, before_line, before_prom, wait_s)
        record.log_window_wait = {"matched": matched, "timeout_s": wait_s, "after_line": before_line}
        atomic_write_text(d / "metrics_after.prom", after_text)
        if cell.is_baseline:
            acc = collect.baseline_acceptance(before_prom, collect.prometheus_counts(after_text), windows)
        else:
            units = collect.request_units(requests)
            acc = collect.build_acceptance(
                num_spec_tokens=cell.num_spec_tokens,
                prom=prom,
                windows=windows,
                window_warnings=warns,
                req_units=units,
                per_request_mode=study.serve.per_request_metrics,
            )
            if not prom or not prom.num_drafts:
                raise CellFailed(collect.NO_SPEC_COUNTS)
            if collect.reset_problem(prom):
                raise CellFailed(collect.reset_problem(prom))
        covers = result.spec.get("accounting") or {}
        if covers.get("server_not_recorded") or covers.get("failed"):
            # llmperf: the /metrics counts cover requests that requests.jsonl does not time.
            acc.warnings = [*acc.warnings, covers["acceptance_covers"]]
        record.timings.collect_s = round(time.monotonic() - t0, 2)
        return acc


def _load(
    ctx: RunContext,
    url: str,
    model: str,
    n: int,
    progress: Callable | None,
    out_dir: Path,
    api_key: str | None = None,
    cell: Cell | None = None,
    warmup: bool = False,
    start: int = 0,
):
    ld = ctx.study.load
    if ld.driver == "llmperf":
        from specbench.load.llmperf import llmperf_spec, run_llmperf

        spec = llmperf_spec(ld, n, cell.args if cell else [], api_key=api_key, warmup=warmup)
        return run_llmperf(url, model, spec, out_dir, progress=progress)
    from specbench.load.driver import run_load

    return run_load(url, model, ctx.prompts, _spec(ld, n, api_key), progress=progress, start=start)


def _spec(ld, n: int, api_key: str | None = None):
    from specbench.load.driver import LoadSpec

    return LoadSpec(
        num_requests=n,
        concurrency=ld.concurrency,
        max_tokens=ld.max_tokens,
        temperature=ld.temperature,
        seed=ld.seed,
        timeout_s=ld.timeout_s,
        api_key=api_key,
    )


def _short_state_dir() -> Path:
    """A private per-server dir with a SHORT path: vLLM's ZMQ IPC sockets live under it and a
    Unix socket path may not exceed 107 bytes, which a run dir + cell id easily does."""
    import tempfile

    base = "/tmp" if os.path.isdir("/tmp") else None
    return Path(tempfile.mkdtemp(prefix="sb-", dir=base))


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


@dataclass
class RunPlan:
    study: Study
    cells: list[Cell]
    run_dir: Path
    run_id: str
    manifest: dict[str, Any]
    skip: set[str] = field(default_factory=set)  # cells already done (--resume)
    notes: list[str] = field(default_factory=list)  # said before the run starts (where secrets came from)


def execute(plan: RunPlan, display: Display, executor: Executor) -> int:
    """Run the plan's cells, rewriting manifest and tables after each; returns the exit code.

    The run directory is locked meanwhile (a second run of it is refused), and the manifest never
    ends "running": Ctrl-C/SIGTERM/SIGHUP leave it "interrupted", any other error "failed"."""
    with store.run_lock(plan.run_dir):
        try:
            return _execute(plan, display, executor)
        except KeyboardInterrupt:
            raise  # _execute saved the manifest as "interrupted"
        except BaseException as exc:
            _mark_failed(plan, exc)
            raise


def _mark_failed(plan: RunPlan, exc: BaseException) -> None:
    from specbench.redact import scrub_text, secret_values

    secrets = [s for c in plan.cells for s in secret_values(c.env, c.args, include_process_env=True)]
    message = (str(exc).strip().splitlines() or [""])[0]
    plan.manifest.update(
        status="failed", ended_at=utc_now(), error=scrub_text(f"{type(exc).__name__}: {message}", secrets)
    )
    try:
        store.write_manifest(plan.run_dir, plan.manifest)
    except OSError:
        pass  # the original error says more than this one (a full disk, say)


def _execute(plan: RunPlan, display: Display, executor: Executor) -> int:
    from specbench.load.prompts import load_prompts

    study = plan.study
    prompts = load_prompts(categories=study.load.prompts.categories, path=study.load.prompts.path)
    manifest = plan.manifest
    ctx = RunContext(
        study=study,
        run_dir=plan.run_dir,
        prompts=prompts,
        display=display,
        cell_hosts=dict(manifest.get("cell_hosts") or {}),
    )
    manifest.update(status="running", ended_at=None)
    store.write_manifest(plan.run_dir, manifest)
    display.start(plan.cells)
    for c in plan.cells:
        if c.cell_id in plan.skip:
            display.update(c.cell_id, "done", **_summary_info(plan.run_dir, c.cell_id))
    tables = store.Tables(
        plan.run_dir, plan.run_id, list(study.matrix), [c.cell_id for c in plan.cells]
    ).read_existing()  # once; then a row per cell as it ends
    by_id = {c.cell_id: c for c in plan.cells}
    results = _cell_results(executor, [c for c in plan.cells if c.cell_id not in plan.skip], ctx)
    try:
        for record, acc in results:
            record = as_record(CellRecord, record)  # an executor may hand back the plain dict
            if record.node:  # Ray: the node that ran the cell (never written to cell.json)
                ctx.cell_hosts[record.cell_id] = record.node
            store.write_cell(plan.run_dir, record, acc)
            tables.add(record, None if acc is None else as_record(Acceptance, acc))
            tables.write()
            timings.note_run_cell(plan.study, by_id.get(record.cell_id), record, plan.run_id)  # for --dry-run
            info = _summary_info(plan.run_dir, record.cell_id)
            display.update(record.cell_id, record.status, reason=record.reason, **info)
    except KeyboardInterrupt:
        results.close()  # a concurrent executor cancels its running cells (and saves them) first
        _note_hosts(manifest, ctx)
        manifest.update(status="interrupted", ended_at=utc_now())
        store.write_manifest(plan.run_dir, manifest)
        tables.read_existing().write()  # once: the cells an executor saved itself while being interrupted
        display.close()
        raise
    finally:
        results.close()
    records = [_cell_json(plan.run_dir, c.cell_id) for c in plan.cells]
    failed = [r for r in records if not r or r.status != "done"]
    _note_hosts(manifest, ctx)
    manifest.update(status="done" if not failed else "some_failed", ended_at=utc_now())
    store.write_manifest(plan.run_dir, manifest)
    tables.write()
    display.finish(plan.run_dir, [r for r in records if r])
    return EXIT_OK if not failed else EXIT_SOME_FAILED


def _note_hosts(manifest: dict, ctx: RunContext) -> None:
    if ctx.cell_hosts:  # only executors that run cells elsewhere name hosts
        manifest["cell_hosts"] = ctx.cell_hosts
    if ctx.switch_fallbacks:  # a resumed run keeps the earlier attempt's notes too
        manifest["head_switch_fallbacks"] = [
            *manifest.get("head_switch_fallbacks", []),
            *(n for n in ctx.switch_fallbacks if n not in manifest.get("head_switch_fallbacks", [])),
        ]


def _cell_results(executor: Executor, cells: list[Cell], ctx: RunContext):
    """(record, acceptance) per cell as cells finish: an executor that runs cells concurrently
    (Ray) yields them from ``run_cells``; others run one cell at a time."""
    if hasattr(executor, "run_cells"):
        yield from executor.run_cells(cells, ctx)
        return
    for cell in cells:
        yield executor.run_cell(cell, ctx)


def _cell_json(run_dir: Path, cell_id: str) -> CellRecord | None:
    p = store.cell_dir(run_dir, cell_id) / store.CELL_JSON
    return load(CellRecord, p) if p.exists() else None


def _acceptance_json(run_dir: Path, cell_id: str) -> Acceptance | None:
    p = store.cell_dir(run_dir, cell_id) / store.ACCEPTANCE_JSON
    return load(Acceptance, p) if p.exists() else None


def _summary_info(run_dir: Path, cell_id: str) -> dict[str, Any]:
    acc = _acceptance_json(run_dir, cell_id)
    if acc is None:
        return {}
    pos = acc.derived.per_position
    return {"al": acc.derived.mean_acceptance_length, "p0": pos[0] if pos else None}

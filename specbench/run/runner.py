"""Run a study: cells one after another (local executor), saving the run directory after every cell.

Per cell (run/lifecycle.py, run/measure.py): start vLLM -> attest -> warmup -> wait until the
warmup's log windows are printed -> scrape /metrics (before) -> load -> wait until the log windows
since 'before' add up to the /metrics diff -> scrape (after) -> stop -> collect. A failed cell
(server dies, never healthy, load errors above the threshold) is recorded and the run goes on.
Exit codes: 0 all cells done, 3 some failed, 130 interrupted (Ctrl-C: the server is stopped and
finished cells are kept).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from specbench import redact
from specbench.config import Study
from specbench.errors import DependencyError, InputError
from specbench.load.prompt_sets import Prompt
from specbench.load.workloads import load_workload
from specbench.records.cell import WorkloadProvenance
from specbench.records.files import Acceptance, CellRecord, Manifest, as_record, load
from specbench.results import store
from specbench.run import timings
from specbench.run.cells import Cell
from specbench.run.lifecycle import (
    CellLife,
    Display,
    RunContext,
    ServerSession,
    attest_cell,
    stats_wait_s,
    utc_now,
)
from specbench.run.lifecycle import new_record as new_record  # re-exported: tests build records with it
from specbench.run.lifecycle import remove_tree as _remove_tree  # noqa: F401 - re-exported: tests/serve/test_server_cache.py
from specbench.run.measure import measure_cell

__all__ = ["Executor", "LocalExecutor", "RunContext", "RunPlan", "execute"]


class Executor(Protocol):
    """Runs one cell and returns (cell record, acceptance record or None). An executor that runs
    cells concurrently (ray_executor.RayExecutor) also has ``run_cells(cells, ctx)``, yielding
    them as they finish; execute() closes that generator on Ctrl-C so it can cancel its tasks."""

    def run_cell(self, cell: Cell, ctx: RunContext) -> tuple[CellRecord, Acceptance | None]: ...


class LocalExecutor:
    """Cells one after another on this machine, each on a server of its own."""

    def run_cell(self, cell: Cell, ctx: RunContext) -> tuple[CellRecord, Acceptance | None]:
        life = CellLife(cell, ctx)
        session = ServerSession(ctx, cell.args, cell.env, life.dir / "server.log", python=cell.python)
        try:
            acc = life.run(session.server, lambda: self._start_and_measure(cell, ctx, life, session))
        finally:
            try:
                session.stop()
            finally:
                life.close(session.server, session.secrets)  # after the stop: its exit status and last lines
        return life.record, acc

    @staticmethod
    def _start_and_measure(cell: Cell, ctx: RunContext, life: CellLife, session: ServerSession) -> Acceptance:
        record, server = life.record, session.server
        ctx.display.update(cell.cell_id, "starting")
        try:
            session.start()
        finally:
            if server.port is not None:  # known once start() picked it
                record.port, record.argv = server.port, session.argv()
        record.timings.startup_s = session.startup_s
        record.vllm_version = server.vllm_version()
        attest_cell(cell, record, session.log_path)
        return measure_cell(cell, ctx, server, life.dir, session.log_path, stats_wait_s(ctx), record)


@dataclass
class RunPlan:
    """A run to execute: its study and cells, its directory, and its manifest as written so far
    (replaced, never changed in place: :meth:`note` gives it the keys it gets while running)."""

    study: Study
    cells: list[Cell]
    run_dir: Path
    run_id: str
    manifest: Manifest
    skip: set[str] = field(default_factory=set)  # cells already done (--resume)
    notes: list[str] = field(default_factory=list)  # said before the run starts (where secrets came from)

    def note(self, **changes: Any) -> None:
        """Set manifest keys (a key it lacks goes after the ones it has, as manifest.json writes them)."""
        self.manifest = self.manifest.with_(**changes)

    def save(self, **changes: Any) -> None:
        """Set manifest keys (:meth:`note`) and write manifest.json."""
        self.note(**changes)
        store.write_manifest(self.run_dir, self.manifest)


# How a run that was not interrupted ended: the manifest's status (its exit code is the CLI's, cli/exits.py).
RunEnd = Literal["done", "some_failed"]


def execute(plan: RunPlan, display: Display, executor: Executor) -> RunEnd:
    """Run the plan's cells, rewriting manifest and tables after each; returns how the run ended
    (:data:`RunEnd`: ``done``, or ``some_failed`` when a cell did not finish).

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
    secrets = [s for c in plan.cells for s in redact.secret_values(c.env, c.args, include_process_env=True)]
    message = (str(exc).strip().splitlines() or [""])[0]
    try:
        plan.save(
            status="failed", ended_at=utc_now(), error=redact.scrub_text(f"{type(exc).__name__}: {message}", secrets)
        )
    except OSError:
        pass  # the original error says more than this one (a full disk, say)


def _execute(plan: RunPlan, display: Display, executor: Executor) -> RunEnd:
    study = plan.study
    prompts, workloads = study_prompts(study, plan.cells)
    plan.note(workloads=workloads)
    ctx = RunContext(
        study=study,
        run_dir=plan.run_dir,
        prompts=prompts,
        display=display,
        cell_hosts=dict(plan.manifest.cell_hosts),
        plan_cells=list(plan.cells),
    )
    plan.save(status="running", ended_at=None)
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
        plan.manifest = _note_hosts(plan.manifest, ctx)
        plan.save(status="interrupted", ended_at=utc_now())
        tables.read_existing().write()  # once: the cells an executor saved itself while being interrupted
        display.close()
        raise
    finally:
        results.close()
    records = [_cell_json(plan.run_dir, c.cell_id) for c in plan.cells]
    failed = [r for r in records if not r or r.status != "done"]
    plan.manifest = _note_hosts(plan.manifest, ctx)
    end: RunEnd = "done" if not failed else "some_failed"
    plan.save(status=end, ended_at=utc_now())
    tables.write()
    display.finish(plan.run_dir, [r for r in records if r])
    return end


def study_prompts(study: Study, cells: list[Cell]) -> tuple[list[Prompt], dict[str, WorkloadProvenance]]:
    """Every workload's prompts the study sends (its load.workload, or each load:workload value),
    and each workload's provenance for the manifest. A sampled workload (sharegpt) draws as many
    distinct prompts as a cell sends at most, and reads the target's tokenizer for its filters."""
    ld = study.load
    names = study.workload_names()
    n = ld.max_requests or ld.num_requests  # num_requests is no load axis: one count for every cell
    prompts: list[Prompt] = []
    provenance: dict[str, WorkloadProvenance] = {}
    for name in names:
        wl = load_workload(
            name,
            num_prompts=n,
            seed=ld.seed,
            categories=ld.prompts.categories,
            tokenizer=lambda: _target_tokenizer(study, cells),
        )
        prompts.extend(wl.prompts)
        provenance[name] = wl.provenance.with_(**_chat_template(study, cells))
    return prompts, provenance


def _chat_template(study: Study, cells: list[Cell]) -> dict[str, Any]:
    """Which chat template the server applies to every prompt (requests go to /v1/chat/completions):
    the sha256 of the target's own, read from its directory when the model is local."""
    model = Path(next((c.args[0] for c in cells if c.args), study.serve.model))
    for name, read in (
        ("chat_template.jinja", lambda p: p.read_text(encoding="utf-8")),
        ("tokenizer_config.json", lambda p: json.loads(p.read_text(encoding="utf-8")).get("chat_template")),
    ):
        try:
            text = read(model / name) if (model / name).is_file() else None
        except (OSError, ValueError, AttributeError):
            text = None
        if isinstance(text, str) and text:
            return {
                "chat_template_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "chat_template_from": name,
            }
    return {"chat_template_sha256": None, "chat_template_from": "not read (model not local): the server's default"}


def _target_tokenizer(study: Study, cells: list[Cell]) -> Any:
    model = next((c.args[0] for c in cells if c.args), study.serve.model)
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise DependencyError(
            "the sharegpt workload counts tokens with transformers; install vLLM (./setup.sh)"
        ) from None
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # counting a reply longer than the model's context is fine: only its length is used
    try:
        return AutoTokenizer.from_pretrained(model, trust_remote_code=bool(study.serve.trust_remote_code))
    except Exception as exc:  # noqa: BLE001 - any loader failure is one input error
        raise InputError(
            f"serve.model {model!r}: cannot load its tokenizer for the sharegpt workload's length filters "
            f"({type(exc).__name__}); download the model first or use another workload"
        ) from None


def _note_hosts(manifest: Manifest, ctx: RunContext) -> Manifest:
    """``manifest`` with the run's cell_hosts and head_switch_fallbacks (where it has any)."""
    if ctx.cell_hosts:  # only executors that run cells elsewhere name hosts
        manifest = manifest.with_(cell_hosts=ctx.cell_hosts)
    if ctx.switch_fallbacks:  # a resumed run keeps the earlier attempt's notes too
        had = manifest.head_switch_fallbacks
        seen = [n.dump() for n in had]
        manifest = manifest.with_(
            head_switch_fallbacks=[*had, *(n for n in ctx.switch_fallbacks if n.dump() not in seen)]
        )
    return manifest


def _cell_results(
    executor: Executor, cells: list[Cell], ctx: RunContext
) -> Generator[tuple[CellRecord, Acceptance | None], None, None]:
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

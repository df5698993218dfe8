"""Cells that differ only in load settings share one vLLM server.

A ``load:`` axis (concurrency, max_tokens, temperature, prompt category) changes what is sent, not
what is served, so restarting vLLM for each value would only add start-ups (60-220 s each on a
2-core machine) to loads of seconds. The cells of a *group* (same server argv, env, non-load axes,
baseline-ness and repeat) run one after another on one server:

    start -> warmup (once) -> for each cell: reset prefix cache -> wait until the log windows
    since the start add up to /metrics -> scrape (before) -> load -> wait until the windows after
    'before' add up to the /metrics diff -> scrape (after)  -> stop

That is run/measure.py's :func:`measure_cell` per cell, inside run/lifecycle.py's :class:`CellLife`
(the failure branches and the save, as for a cell with its own server), so each cell's counts are
checked exactly as for a cell with its own server: log windows, per-request totals and the /metrics diff. A window belongs
to the cell whose 'before' line precedes it (log line offsets), so no window is counted twice.

Warmup runs once per server: it absorbs the first-request costs (graph capture, allocator growth)
that a server pays once; a later cell follows a full load on the same warm server, and its own
prefix cache is emptied first so it does not start with the previous cell's prompts cached.

Cells that differ only in their DeepSeek head's variant share a server too (compiled or eager):
it starts with the plugin's switchable head class, one probe asks every worker whether it can
switch (plugin/switch.py), and before each cell the variant is switched in place and every worker's
read-back checked. A server that cannot switch is stopped before any cell runs on it, and each
variant gets a server of its own (the reason in the manifest's ``head_switch_fallbacks``).

Repeats keep their own servers (a repeat is meant to measure the start-to-start spread too).
Groups of one cell run exactly as before (:meth:`LocalExecutor.run_cell`).

Files: the group's full server log is ``servers/<first cell>/server.log`` in the run directory;
each cell's directory keeps ``server.log`` with its own slice of it (the first slice includes the
start-up and warmup), and cell.json says which server ran the cell (``server_group``), which lines
of the full log are its slice and which load settings it used (``load``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

from specbench import redact
from specbench.axis import LOAD_AXES, on_off
from specbench.config import Load
from specbench.errors import ConfigError, ServerError
from specbench.io import atomic_write_text
from specbench.records.attestation import control_not_compared
from specbench.records.cell import HeadSwitch, HeadSwitchFallback, LoadSettings, ServerGroup
from specbench.records.files import Acceptance, CellRecord
from specbench.run.cells import Cell
from specbench.run.interleave import Companions
from specbench.run.lifecycle import (
    CellFailed,
    CellLife,
    RunContext,
    ServerSession,
    attest_cell,
    log_lines,
    loopback,
    remove_tree,
    reset_prefix_cache,
    stats_wait_s,
)
from specbench.run.measure import measure_cell, warm_up
from specbench.run.runner import LocalExecutor
from specbench.serve.plugin.switch import DEV_MODE_ENV, probe, server_additions, switch_variant, switchable
from specbench.serve.plugin.switches import HEAD_VAR, SWITCH_VARS, head_of_method, switches_from_env

Result = tuple[CellRecord, Acceptance | None]
SERVERS_DIR = "servers"


def group_key(cell: Cell, host: str = "127.0.0.1") -> tuple:
    """Cells with equal keys can share a server: same argv and env, same non-load axes; for a cell
    whose head variant can be switched in place (:func:`head_switchable`), the variant is left out."""
    switch = head_switchable(cell, host)
    axes = tuple((a, str(v)) for a, v in cell.axes.items() if a not in LOAD_AXES and not (switch and a in VARIANT_AXES))
    env = shipped_env(cell.env) if switch else cell.env
    return (cell.is_baseline, cell.repeat, tuple(cell.args), tuple(sorted(env.items())), axes, cell.vllm)


def group_cells(cells: list[Cell], host: str = "127.0.0.1", share: bool = True) -> list[list[Cell]]:
    """The cells partitioned into server groups, in order of each group's first cell (``share``
    False: one group per cell)."""
    if not share:
        return [[c] for c in cells]
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        groups.setdefault(group_key(c, host), []).append(c)
    return list(groups.values())


# Axes that only select the plugin's head variant (their environment entries: shipped_env).
VARIANT_AXES = ("output_norm", "pos0_mask", "env:SPECBENCH_OUTPUT_NORM", "env:SPECBENCH_POS0_MASK")


def group_server(group: list[Cell], host: str) -> tuple[list[str], dict[str, str], bool]:
    """(argv, env, switching) of the one server a group of cells shares, as it is started (and as
    ``run --dry-run`` prints it): the first cell's, plus dev mode on a loopback host and, where the
    cells ask for different head variants, the plugin's switch extension at the shipped head."""
    first = group[0]
    env, args = dict(first.env), list(first.args)
    # vLLM 0.32 serves /reset_prefix_cache and /collective_rpc only with VLLM_SERVER_DEV_MODE=1
    # (its own `vllm bench sweep serve` sets it too): only where nothing but this machine can reach them
    if len(group) > 1 and loopback(host):
        env.setdefault(DEV_MODE_ENV, "1")
    # Cells asking for different head variants: start the plugin's class at the head's shipped
    # values, ask every worker whether it can switch (probe), switch before each cell.
    switching = len({head_variant(c) for c in group}) > 1
    if switching:
        extra_args, extra_env = server_additions(first.method)
        env, args = {**shipped_env(env), **extra_env}, args + extra_args
    return args, env, switching


def shipped_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the variables that select a head variant (the server then starts as shipped)."""
    return {k: v for k, v in env.items() if k not in (*SWITCH_VARS, HEAD_VAR)}


def head_variant(cell: Cell) -> tuple[str, bool]:
    """(output_norm, pos0_mask) the cell's server is configured to run on its DeepSeek head (the
    switches in its environment, what the plugin reads; pos0 mask: that head's shipped value when
    unset). What the cell claims is its ``spec``; attestation holds the two against each other."""
    sw = switches_from_env(cell.env)
    head = sw.head or head_of_method(configured_method(cell)) or "eagle"
    return sw.output_norm, sw.mask_for(head)


def configured_method(cell: Cell) -> str:
    """The speculative method the cell's server is started with (its ``--speculative-config``), not
    the one the cell claims: what is enacted follows the configuration, attestation checks the claim."""
    args = list(cell.args)
    for i, a in enumerate(args[:-1]):
        if a == "--speculative-config":
            try:
                return str(json.loads(args[i + 1]).get("method") or "eagle")
            except (ValueError, AttributeError):
                break
    return "eagle"


def head_switchable(cell: Cell, host: str) -> bool:
    """Whether this cell's head variant may be switched inside a shared server (plugin/switch.py),
    from what the cell asks for (its ``spec``). Optimistic in every compile mode: the variants are
    data in the module, so a compiled graph stays valid across a switch; the runner's probe at
    start-up confirms it and falls back to a server per variant where the server says it cannot."""
    spec = cell.spec
    if cell.is_baseline or cell.draft is None or spec is None or spec.head_variant is None:
        return False  # no DeepSeek head, or an unknown switch value (plan.check_cells refuses it)
    if spec.head_variant.control:
        return False  # the control variant is registered at start-up by design: it keeps its own server
    return switchable(spec.method or "eagle") and loopback(host)


def _control_not_compared(cell: Cell) -> Cell:
    """``cell`` checked as :func:`specbench.records.attestation.control_not_compared` says."""
    return dataclasses.replace(cell, spec=control_not_compared(cell.spec))


def load_settings(load: Load) -> LoadSettings:
    """What a cell's load was, for cell.json (the effective values, axis or not)."""
    cats = load.prompts.categories
    return LoadSettings(
        driver=load.driver,
        num_requests=load.num_requests,
        concurrency=load.concurrency,
        max_tokens=load.max_tokens,
        temperature=load.temperature,
        category=cats[0] if cats and len(cats) == 1 else cats,
        workload=load.workload_name,
        output_len=load.output_len,
        warmup_requests=load.warmup_requests,
    )


def cell_context(ctx: RunContext, cell: Cell, *, warmup: bool = True) -> RunContext:
    """``ctx`` with the study's load overridden by the cell's load axes (and prompts narrowed to
    its category); ``warmup=False`` for the later cells of a group."""
    if not cell.load and warmup:
        return ctx
    load = ctx.study.load
    update: dict[str, Any] = {k: v for k, v in cell.load.items() if k not in ("category", "workload")}
    if not warmup:
        update["warmup_requests"] = 0
    prompts = ctx.prompts
    if "category" in cell.load:
        cat = cell.load["category"]
        prompts = [p for p in prompts if p.category == cat]
        if not prompts:
            raise ConfigError(
                f"matrix.load:category: no prompts of category {cat!r} in "
                f"{load.prompts.path or 'the built-in prompt sets'}"
            )
        update["prompts"] = load.prompts.model_copy(update={"categories": [cat]})
    if "workload" in cell.load:
        prompts = [p for p in prompts if p.workload == cell.load["workload"]]
        update["workload"] = cell.load["workload"]
    study = ctx.study.model_copy(update={"load": load.model_copy(update=update)})
    return dataclasses.replace(ctx, study=study, prompts=prompts)


def _group_session(
    group: list[Cell], ctx: RunContext, companion: tuple[ServerSession, str] | None
) -> tuple[ServerSession, bool]:
    """The group's server session (not started yet) in a fresh servers/ directory, or the
    companion's; and whether it switches head variants in place."""
    if companion is not None:
        return companion[0], False
    first = group[0]
    gdir = ctx.run_dir / SERVERS_DIR / first.cell_id
    remove_tree(gdir)
    gdir.mkdir(parents=True, exist_ok=True)
    args, env, switching = group_server(group, ctx.study.serve.host)
    return ServerSession(ctx, args, env, gdir / "server.log", python=first.python), switching


def _group_info(
    group: list[Cell], session: ServerSession, companion: tuple[ServerSession, str] | None
) -> dict[str, Any]:
    gid = group[0].cell_id
    info: dict[str, Any] = {
        "id": gid,
        "cells": [c.cell_id for c in group],
        "log": f"{SERVERS_DIR}/{gid}/server.log" if companion is None else companion[1],
        "startup_s": None,
        "dev_mode": session.env.get(DEV_MODE_ENV) == "1",
    }
    if companion is not None:
        info["companion"] = True  # started (and warmed up) for load.interleave: no start-up here
    return info


def _start_group_server(ctx: RunContext, gid: str, session: ServerSession, info: dict[str, Any]) -> str | None:
    """Start the group's server; None when it started, else why it did not (its cells fail with it)."""
    try:
        ctx.display.update(gid, "starting")
        session.start()
        info["startup_s"] = session.startup_s
    except ServerError as exc:
        return "the group's server did not start: " + str(exc).split("\n", 1)[0]
    return None


def _group_cell_life(
    cell: Cell,
    ctx: RunContext,
    i: int,
    info: dict[str, Any],
    argv: list[str] | None,
    port: int | None,
    version: str | None,
) -> CellLife:
    """The life of the group's ``i``-th cell, its record saying which server runs it."""
    life = CellLife(cell, ctx)
    record = life.record
    record.argv, record.port, record.vllm_version = argv, port, version
    record.load = load_settings(cell_context(ctx, cell).study.load)
    record.server_group = ServerGroup.model_validate({**info, "index": i})
    record.timings.startup_s = info["startup_s"] if i == 0 else 0.0
    return life


class GroupedExecutor(LocalExecutor):
    """The local executor, with cells that differ only in load axes sharing one server."""

    def run_cells(self, cells: list[Cell], ctx: RunContext) -> Iterator[Result]:
        serve = ctx.study.serve
        companions = Companions(ctx, cells, lambda server, base: warm_up(ctx, server.url, base))
        if companions.pairs:  # load.interleave (run/interleave.py)
            ctx = dataclasses.replace(ctx, companion=companions.get)
        try:
            by_id = {c.cell_id: c for c in cells}
            for group in group_cells(cells, serve.host, serve.share_servers):
                companion = companions.serves(group)  # baseline cells run on their running companion
                if companion is not None:
                    results: Iterable[Result] = self.run_group(group, ctx, companion)
                elif len(group) == 1:
                    results = [self.run_cell(group[0], ctx)]
                else:
                    results = self.run_group(group, ctx)
                for record, acc in results:
                    companions.done(record.cell_id, by_id.get(record.cell_id))
                    yield record, acc
        finally:
            companions.close()

    def run_cell(self, cell: Cell, ctx: RunContext) -> Result:
        record, acc = super().run_cell(cell, cell_context(ctx, cell) if cell.load else ctx)
        record.load = load_settings(cell_context(ctx, cell).study.load)
        return record, acc

    def run_group(
        self, group: list[Cell], ctx: RunContext, companion: tuple[ServerSession, str] | None = None
    ) -> Iterator[Result]:
        """The group's cells on one server: started here, or ``companion``, a running interleave
        companion of these baseline cells (its log's path in the run directory), left running."""
        gid = group[0].cell_id
        session, switching = _group_session(group, ctx, companion)
        server = session.server
        info = _group_info(group, session, companion)
        slice_start = 0 if companion is None else log_lines(session.log_path)[1]
        dead_reason: str | None = None
        cannot_switch: str | None = None
        try:
            if companion is None:
                dead_reason = _start_group_server(ctx, gid, session, info)
            if switching and dead_reason is None:
                cannot_switch = probe(server.url)  # not None: no cell runs here; see below
            argv = session.argv()
            version = server.vllm_version() if dead_reason is None else None
            for i, cell in enumerate(group if cannot_switch is None else []):
                # a companion was warmed up when it started; a ConfigError here leaves the cell's dir alone
                cctx = cell_context(ctx, cell, warmup=(i == 0 and companion is None))
                life = _group_cell_life(cell, ctx, i, info, argv, server.port, version)
                record = life.record
                if dead_reason is None and not server.is_alive():
                    dead_reason = "the group's server died before this cell"
                fresh = i == 0 and companion is None  # a companion served other cells' prompts before
                steps = partial(self._on_shared_server, cell, cctx, life, session, switching, dead_reason, fresh)
                try:
                    acc = life.run(server, steps)
                except KeyboardInterrupt:
                    self._finish_group_cell(life, session, slice_start)
                    raise
                if record.status != "done" and dead_reason is None and not server.is_alive():
                    dead_reason = f"the group's server died during cell {cell.cell_id}"
                slice_start = self._finish_group_cell(life, session, slice_start)
                yield record, acc
        finally:
            if companion is None:  # a companion is stopped by its Companions, after its last cell
                session.stop()
        if cannot_switch is not None:  # this server is stopped: the cells get a server per variant
            yield from self._server_per_variant(group, ctx, cannot_switch)

    def _on_shared_server(
        self,
        cell: Cell,
        cctx: RunContext,
        life: CellLife,
        session: ServerSession,
        switching: bool,
        dead_reason: str | None,
        first_cell: bool,
    ) -> Acceptance:
        """A cell's steps on the group's running server: (switch its head), attest, measure."""
        record, server = life.record, session.server
        if dead_reason is not None:
            raise CellFailed(dead_reason)
        cctx.display.update(cell.cell_id, "starting")
        switched, asked = None, cell
        if switching:
            answer = self._switch(server.url, cell)
            record.head_variant = HeadSwitch.model_validate(answer)
            switched = answer["workers"]
            asked = _control_not_compared(cell)
        attest_cell(asked, record, session.log_path, switched)
        record.prefix_cache_reset = "first load" if first_cell else reset_prefix_cache(server)
        return measure_cell(cell, cctx, server, life.dir, session.log_path, stats_wait_s(cctx), record)

    def _server_per_variant(self, group: list[Cell], ctx: RunContext, reason: str) -> Iterator[Result]:
        """The probe said the shared server cannot switch its head: never run a cell on the wrong
        variant; each variant gets a server of its own, started with that variant in its
        environment (cells differing only in load still share it). The reason goes to the manifest,
        each cell's record and the display."""
        reason = redact.scrub_text(reason, redact.secret_values(group[0].env, group[0].args, include_process_env=True))
        gdir = ctx.run_dir / SERVERS_DIR / group[0].cell_id
        probed = gdir.with_name(gdir.name + ".cannot-switch")  # the probed server's log, kept apart
        remove_tree(probed)
        gdir.rename(probed)
        note = HeadSwitchFallback(
            server=f"{SERVERS_DIR}/{probed.name}", cells=[c.cell_id for c in group], reason=reason
        )
        ctx.switch_fallbacks.append(note)
        ctx.display.update(group[0].cell_id, f"cannot switch head in place ({reason}): a server per variant")
        by_variant: dict[tuple[str, bool], list[Cell]] = {}
        for c in group:
            by_variant.setdefault(head_variant(c), []).append(c)
        for cells in by_variant.values():
            results = [self.run_cell(cells[0], ctx)] if len(cells) == 1 else self.run_group(cells, ctx)
            for record, acc in results:
                record.server_group = (record.server_group or ServerGroup()).with_(head_switch_fallback=reason)
                yield record, acc

    @staticmethod
    def _switch(url: str, cell: Cell) -> dict[str, Any]:
        """Switch the running server to ``cell``'s head variant; what each worker now runs, which
        must be that variant in every worker before the cell starts (else the cell fails)."""
        output_norm, pos0_mask = head_variant(cell)
        workers = switch_variant(url, output_norm, pos0_mask)
        want = (output_norm, on_off(bool(pos0_mask)))
        wrong = [
            f"worker {i} runs {w}"
            for i, w in enumerate(workers)
            if not isinstance(w, dict) or (w.get("output_norm"), w.get("pos0_mask")) != want
        ]
        if wrong:
            raise CellFailed(f"head switch to output_norm {output_norm!r}, pos0_mask {want[1]}: " + "; ".join(wrong))
        return {"output_norm": output_norm, "pos0_mask": want[1], "switched_in_place": True, "workers": workers}

    @staticmethod
    def _finish_group_cell(life: CellLife, session: ServerSession, slice_start: int) -> int:
        """The cell's part on the shared server ends: write its slice of the group log (scrubbed)
        and close its record; returns where the next slice starts."""
        text, n = log_lines(session.log_path)
        lines = text.splitlines(keepends=True)[slice_start:n]
        atomic_write_text(life.dir / "server.log", redact.scrub_text("".join(lines), session.secrets))
        life.record.server_group = (life.record.server_group or ServerGroup()).with_(log_lines=[slice_start + 1, n])
        life.close(session.server, session.secrets)
        return n

"""A speculative cell's speed-up measured in time with its baseline (``load.interleave: N``).

A cell and its baseline cell run minutes apart, and on a shared machine what happens in between
moves their throughput ratio far more than their requests do (docs/methods.md, "Speed-up across
reruns"). With ``load.interleave: N`` the baseline cell's server is started a second time beside
the speculative cells that measure against it (a *companion*: the baseline cell's own argv and
env, warmed up like any server), and each such cell's load alternates with the same requests on
the companion in blocks of N requests, in ABBA order (cell, companion, companion, cell, cell, ...)
so that a drift of the machine during the load falls on both sides alike.

The companion's requests are the cell's ``paired_baseline/requests.jsonl`` (with their
summary.json); cell.json's ``paired_baseline`` names the baseline cell, the blocks and the
companion's log. The speed-up of such a cell is computed against those requests, request by
request (the same ids and prompts, adjacent in time), wherever a speed-up is shown or gated. The
baseline cells themselves still run and are measured as without interleaving, on the companion
(their server: the same argv and env, dev mode aside), after its last speculative cell: an
interleaved run starts no other server for them.

Only one server loads at a time: the other waits idle. A companion is started when the first cell
that needs it starts its load, and stopped after the last cell that needs it, speculative or
baseline (at most one per baseline server is up). A companion that fails to start leaves its cells measured without it (the reason in their
``paired_baseline``); their speed-up then is against the baseline cell's own load, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from specbench.config import Study
from specbench.errors import ServerError
from specbench.load.precision import merge_batches
from specbench.records.baseline import pick_baseline
from specbench.results.store import PAIRED_BASELINE
from specbench.run.cells import Cell
from specbench.run.lifecycle import Companion, PairedInfo, RunContext, ServerSession, loopback, reset_prefix_cache
from specbench.serve.plugin.switch import DEV_MODE_ENV

PAIRED_DIR = PAIRED_BASELINE  # in a cell's directory: the companion's requests for that cell
COMPANIONS_DIR = "companions"  # in the run directory: one folder per companion server (its log)


def pairs(study: Study, cells: list[Cell]) -> dict[str, Cell]:
    """Speculative cell id -> the baseline cell whose server it interleaves with (only with
    ``load.interleave``; a cell without a matching baseline is not in it)."""
    if not study.load.interleave:
        return {}
    baselines = [(b.axes, b.repeat, b) for b in cells if b.is_baseline]
    out = {}
    for c in cells:
        if not c.is_baseline:
            base = pick_baseline(c.axes, c.repeat, baselines, study.baseline.draft_axes)
            if base is not None:
                out[c.cell_id] = base
    return out


def server_key(base: Cell) -> tuple:
    # baseline cells differing only in load axes are served alike: one companion for all of them;
    # repeats keep their own (a repeat measures the start-to-start spread too, as in run/groups.py)
    return base.repeat, tuple(base.args), tuple(sorted(base.env.items())), base.vllm


class Companions:
    """The companion servers of a run: started on first use, stopped after their last cell. One per
    distinct baseline server (baseline cells that differ only in load axes share it)."""

    def __init__(self, ctx: RunContext, cells: list[Cell], warmup: Callable[[Any, Cell], None]):
        """``cells``: those to run now; their baselines are looked up among all the plan's cells
        (``ctx.plan_cells``: a resumed run's finished baseline still pairs with its cells)."""
        self.ctx = ctx
        running = {c.cell_id for c in cells}
        every = pairs(ctx.study, ctx.plan_cells or cells)
        self.pairs = {cid: base for cid, base in every.items() if cid in running}
        self.left: dict[tuple, int] = {}  # server key -> spec cells still to run against it
        self.names: dict[tuple, str] = {}  # server key -> its folder (the first baseline cell's id)
        for base in self.pairs.values():
            key = server_key(base)
            self.left[key] = self.left.get(key, 0) + 1
            self.names.setdefault(key, base.cell_id)
        # baseline cells still to run whose server a companion is: they run on it (serves()), so an
        # interleaved run starts no server of its own for them
        self.bases_left: dict[tuple, int] = {}
        for c in cells:
            if c.is_baseline and server_key(c) in self.left:
                self.bases_left[server_key(c)] = self.bases_left.get(server_key(c), 0) + 1
        self.sessions: dict[tuple, ServerSession] = {}
        self.failed: dict[tuple, str] = {}
        self._warmup = warmup

    def get(self, cell: Cell) -> Companion | None:
        """(running companion server, its baseline cell, what cell.json records) for ``cell``;
        None when the cell has no baseline to interleave with. A companion that cannot start gives
        a record with the reason and no server."""
        base = self.pairs.get(cell.cell_id)
        if base is None:
            return None
        key = server_key(base)
        name = self.names[key]
        info: PairedInfo = {"cell": base.cell_id, "server_log": f"{COMPANIONS_DIR}/{name}/server.log"}
        if key in self.failed:
            return Companion(None, base, {**info, "error": self.failed[key]})
        session = self.sessions.get(key)
        if session is not None and not session.server.is_alive():
            self.sessions.pop(key).stop()
            self.failed[key] = "the baseline's server died before this cell"
            return Companion(None, base, {**info, "error": self.failed[key]})
        if session is None:
            d = self.ctx.run_dir / COMPANIONS_DIR / name
            d.mkdir(parents=True, exist_ok=True)
            env = dict(base.env)
            if loopback(self.ctx.study.serve.host):  # /reset_prefix_cache before each cell (below)
                env.setdefault(DEV_MODE_ENV, "1")
            session = ServerSession(self.ctx, list(base.args), env, d / "server.log", python=base.python)
            self.sessions[key] = session  # from here on close() stops it, whatever happens next
            try:
                self.ctx.display.update(cell.cell_id, f"starting its baseline's server ({name})")
                session.start()
                self._warmup(session.server, base)
            except ServerError as exc:
                self.sessions.pop(key).stop()
                self.failed[key] = "the baseline's server did not start: " + str(exc).split("\n", 1)[0]
                return Companion(None, base, {**info, "error": self.failed[key]})
            info["startup_s"] = session.startup_s
        # each cell sends the same prompts again: the companion must not answer them from its cache
        info["prefix_cache_reset"] = reset_prefix_cache(session.server)
        return Companion(session.server, base, info)

    def serves(self, group: list[Cell]) -> tuple[ServerSession, str] | None:
        """The running companion that is ``group``'s server (baseline cells of its server key), with
        its log's path in the run directory; None when there is none (the group starts its own)."""
        first = group[0]
        key = server_key(first)
        session = self.sessions.get(key)
        if not first.is_baseline or session is None or not session.server.is_alive():
            return None
        return session, f"{COMPANIONS_DIR}/{self.names[key]}/server.log"

    def done(self, cell_id: str, cell: Cell | None = None) -> None:
        """``cell_id`` finished: stop its companion when no other cell needs it (no speculative cell
        to pair, no baseline cell to serve)."""
        base = self.pairs.get(cell_id)
        if base is not None:
            key = server_key(base)
            self.left[key] -= 1
        elif cell is not None and cell.is_baseline and server_key(cell) in self.bases_left:
            key = server_key(cell)
            self.bases_left[key] -= 1
        else:
            return
        if self.left[key] <= 0 and self.bases_left.get(key, 0) <= 0 and key in self.sessions:
            self.sessions.pop(key).stop()

    def close(self) -> None:
        while self.sessions:
            self.sessions.popitem()[1].stop()


def interleaved_load(
    n: int, block: int, send_cell: Callable[[int, int], Any], send_base: Callable[[int, int], Any]
) -> tuple[Any, Any, dict[str, Any]]:
    """Requests ``0..n-1`` sent to both servers in blocks of ``block`` (``send_*(start, k)`` gives
    a driver LoadResult), ABBA order; returns each side's merged LoadResult (its duration the sum
    of its own blocks) and what cell.json records about the blocks."""
    parts: dict[str, list[tuple[float, Any]]] = {"cell": [], "base": []}
    sends = {"cell": send_cell, "base": send_base}
    t0 = time.perf_counter()
    order = []
    for i, start in enumerate(range(0, n, block)):
        k = min(block, n - start)
        sides = ("cell", "base") if i % 2 == 0 else ("base", "cell")
        for side in sides:
            t = time.perf_counter() - t0
            res = sends[side](start, k)
            for r in res.requests:
                r["block"] = i  # the unit of the speed-up's interval (analysis/speedup.py)
            parts[side].append((t, res))
        order.append("".join("A" if s == "cell" else "B" for s in sides))
    return (
        _merge(parts["cell"]),
        _merge(parts["base"]),
        {"block": block, "blocks": len(order), "order": " ".join(order)},
    )


def _merge(parts: list[tuple[float, Any]]) -> Any:
    """One side's blocks as one LoadResult; its duration is its own blocks' (the other side's blocks
    between them are not this side's load)."""
    n = sum(len(res.requests) for _, res in parts)
    return merge_batches(parts, sum(res.duration_s for _, res in parts), n)

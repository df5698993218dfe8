"""One cell's life on a vLLM server, written once for every executor.

A cell is started (or reuses a group's server, run/groups.py), attested, measured (run/measure.py)
and saved; whichever step fails, the cell's record says why in the same words. Executors differ
only in how they get a server and where a cell's part on it ends:

- :class:`ServerSession`: a server with its private state dir and the secrets to scrub; its
  ``stop`` stops the server, scrubs its log and removes the state dir on every path, Ctrl-C included.
- :class:`CellLife`: one cell's record from a clean directory to cell.json; :meth:`CellLife.run`
  holds the failure branches (start-up error, failed step, interrupt), :meth:`CellLife.close`
  the end of the cell's part on its server (pid, end time, scrubbed log tail; a cell that did not
  finish is saved as failed so ``--resume`` reruns it).

The local executor (run/runner.py) closes a cell after stopping its own server; the grouped one
closes each cell before the next runs on the shared server; the Ray executor runs the local path
on its node (run/ray_executor.py).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, NamedTuple, Protocol, TypedDict

import httpx

from specbench import redact
from specbench.config import Study
from specbench.errors import ConfigError, DependencyError, ServerError, SpecbenchError
from specbench.load.prompt_sets import Prompt
from specbench.records.attestation import mismatches
from specbench.records.cell import HeadSwitchFallback
from specbench.records.files import Acceptance, CellRecord, Timings
from specbench.results import store
from specbench.run.cells import Cell
from specbench.serve.attest import attest
from specbench.serve.server import VLLMServer

WAIT_EXTRA_S = 15.0  # beyond three stats intervals, for a slow machine
INTERRUPTED = "interrupted (Ctrl-C)"


class PairedInfo(TypedDict, total=False):
    """What cell.json's ``paired_baseline`` (records.cell.PairedBaseline) gets from the companion
    before the load; the load adds the blocks and the companion's request counts."""

    cell: str
    server_log: str
    startup_s: float | None
    prefix_cache_reset: str
    error: str


class Companion(NamedTuple):
    """A speculative cell's companion (run/interleave.py's ``Companions.get``): its baseline's
    running server (None where it could not start, the reason in ``paired``), that baseline cell,
    and ``paired``."""

    server: VLLMServer | None
    base: Cell
    paired: PairedInfo


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
    prompts: list[Prompt]
    display: Display
    python: str | None = None
    # cell id -> node that ran it (the manifest's cell_hosts), for executors that run cells remotely
    cell_hosts: dict[str, str | None] = field(default_factory=dict)
    # shared servers that could not switch their head in place (the manifest's head_switch_fallbacks)
    switch_fallbacks: list[HeadSwitchFallback] = field(default_factory=list)
    # load.interleave: a speculative cell -> its companion, or None; run/interleave.py's Companions.get
    companion: Callable[[Cell], Companion | None] | None = None
    plan_cells: list[Cell] = field(default_factory=list)  # every cell of the plan (--resume runs fewer)


def stats_wait_s(ctx: RunContext) -> float:
    """How long to wait for a server's log windows to add up to /metrics (three stats ticks)."""
    return 3 * ctx.study.serve.log_stats_interval_s + WAIT_EXTRA_S


def log_lines(path: Path) -> tuple[str, int]:
    """The log's text so far and its number of complete lines ("" and 0 before it exists)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "", 0
    return text, text.count("\n")


def new_record(cell: Cell, study: Study) -> CellRecord:
    """cell.json's record for a cell that has not finished (yet): status failed, no results."""
    env: dict[str, str | None] = dict(redact.redact_env(cell.env))
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
        env=env,
        host=study.serve.host,
        port=None,
        vllm_version=None,
        started_at=utc_now(),
        ended_at=None,
        timings=Timings(startup_s=None, load_s=None, collect_s=None),
        log_window_wait=None,
        spec=cell.spec,
    )


def attest_cell(cell: Cell, record: CellRecord, log_path: Path, switched: list[Any] | None = None) -> None:
    """Record what vLLM says it runs for ``cell`` (its server log so far, and the workers' answers to
    an in-place head switch) and fail the cell where that contradicts what the cell asks for."""
    text, _ = log_lines(log_path)
    record.attested = attest(text, switched)
    wrong = mismatches(cell.spec, record.attested)
    if wrong:
        raise CellFailed("attestation: " + "; ".join(wrong))


def close_record(record: CellRecord, server: VLLMServer, secrets: list[str]) -> None:
    """What every cell's record gets when its part on ``server`` ends: the pid, the end time and,
    if it failed, the (scrubbed) log tail and the server's exit status."""
    record.pid = server.pid
    if record.status != "done":
        record.log_tail = redact.scrub_text(server.log_tail(), secrets) or None
        if record.exit_status is None:
            record.exit_status = server.exit_status
    record.ended_at = utc_now()


def short_state_dir() -> Path:
    """A private per-server dir with a SHORT path: vLLM's ZMQ IPC sockets live under it and a
    Unix socket path may not exceed 107 bytes, which a run dir + cell id easily does."""
    base = "/tmp" if os.path.isdir("/tmp") else None
    return Path(tempfile.mkdtemp(prefix="sb-", dir=base))


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _first_line(exc: BaseException) -> str:
    return str(exc).split("\n", 1)[0]


class ServerSession:
    """A vLLM server for one cell or one group of cells, with what must happen when it ends."""

    def __init__(
        self, ctx: RunContext, args: list[str], env: dict[str, str], log_path: Path, python: str | None = None
    ):
        serve = ctx.study.serve
        self.log_path = log_path
        self.env = env
        self.state_dir = short_state_dir()
        self.server = VLLMServer(
            args,
            env,
            log_path,
            host=serve.host,
            port=serve.port,
            startup_timeout_s=serve.startup_timeout_s,
            state_dir=self.state_dir,
            # the cell's vllm install (specbench/serve/installs.py), else the run's, else this one
            python=python or ctx.python or sys.executable,
        )
        # Servers inherit os.environ: its secrets are scrubbed too.
        self.secrets = redact.secret_values(env, args, include_process_env=True)
        self.startup_s: float | None = None

    def start(self) -> None:
        t0 = time.monotonic()
        self.server.start()
        self.startup_s = round(time.monotonic() - t0, 2)

    def argv(self) -> list[str] | None:
        """The server's command line, redacted; None before start() picked a port."""
        return redact.redact_argv(self.server.argv) if self.server.port is not None else None

    def stop(self) -> None:
        try:
            self.server.stop()  # a second Ctrl-C re-raises from here: still scrub and clean up
        finally:
            redact.scrub_file(self.log_path, self.secrets)
            remove_tree(self.state_dir)


class CellLife:
    """One cell's record from a clean directory to cell.json (see the module docstring)."""

    def __init__(self, cell: Cell, ctx: RunContext):
        self.cell, self.ctx = cell, ctx
        self.record = new_record(cell, ctx.study)
        self.dir = store.cell_dir(ctx.run_dir, cell.cell_id)
        # A resumed cell starts clean: an earlier attempt's requests or summary must not end up in
        # this attempt's row. Until this attempt writes cell.json, --resume sees the cell as missing.
        remove_tree(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)

    def run(self, server: VLLMServer, steps: Callable[[], Acceptance]) -> Acceptance | None:
        """Run the cell's ``steps`` (start or switch, attest, measure); the record is "done" with
        their acceptance, or failed with the reason. ConfigError and DependencyError would fail
        every cell alike, and Ctrl-C ends the run: those propagate (the record says interrupted)."""
        record = self.record
        try:
            acc = steps()
        except ServerError as exc:
            record.reason = _first_line(exc)
            record.exit_status = server.exit_status  # set when it exited during start-up
            return None
        except CellFailed as exc:
            record.reason, record.exit_status = exc.reason, exc.exit_status
            return None
        except SpecbenchError as exc:
            if isinstance(exc, (ConfigError, DependencyError)):
                raise  # stop the run and say what to fix
            record.reason = _first_line(exc)
            return None
        except KeyboardInterrupt:
            record.reason = INTERRUPTED
            raise
        record.status = "done"
        return acc

    def close(self, server: VLLMServer, secrets: list[str]) -> None:
        """The cell's part on ``server`` has ended: close the record; a cell that did not finish
        (Ctrl-C included) is saved as failed so --resume reruns it (a finished one is saved by
        runner.execute, with its acceptance and the tables)."""
        close_record(self.record, server, secrets)
        if self.record.status != "done":
            store.write_cell(self.ctx.run_dir, self.record, None)


def loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (dev-mode endpoints are served only there)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def reset_prefix_cache(server: VLLMServer, tries: int = 20, pause_s: float = 0.25) -> str:
    """POST /reset_prefix_cache; "done", "refused" (still false after retries: blocks held) or
    "unavailable" (no dev-mode endpoint). Not resetting changes prefill cost, not the counts."""
    for _ in range(tries):
        try:
            resp = httpx.post(f"{server.url}/reset_prefix_cache", timeout=10.0)
        except httpx.HTTPError:
            return "unavailable"
        if resp.status_code != 200:
            return "unavailable"
        try:
            if resp.json().get("success", True):
                return "done"
        except ValueError:
            return "done"
        time.sleep(pause_s)
    return "refused"

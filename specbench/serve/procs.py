"""Stopping a child process together with everything it started.

Children specbench starts (vLLM servers, llmperf) run in their own session (``start_new_session``)
so a terminal's SIGINT/SIGHUP does not reach them half-way; specbench stops them itself. Killing
only the leader PID leaves its workers (vLLM engine cores, llmperf's Ray workers) running, so the
whole process group is signalled, and descendants that left the group (setsid) are killed by PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading

import psutil


def kill_tree(proc: subprocess.Popen, grace_s: float = 5.0) -> list[int]:
    """SIGTERM ``proc``'s process group, SIGKILL it after ``grace_s``, then any escaped descendant;
    returns the pids of the tree (for :func:`wait_released`).

    ``proc`` must have been started with ``start_new_session=True`` (its pid is its group's id).
    A KeyboardInterrupt during the grace period (the user's second Ctrl-C) kills at once and is
    re-raised."""
    descendants: list[psutil.Process] = []
    # One try from the first statement: a Ctrl-C that lands while the descendants are still being
    # listed must kill the group too.
    try:
        try:
            descendants = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
        _killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        _, alive = psutil.wait_procs(descendants, timeout=max(0.0, min(grace_s, 2.0)))
    except KeyboardInterrupt:
        _kill(proc, descendants)
        raise
    _kill(proc, alive)
    return [proc.pid, *(d.pid for d in descendants)]


def gpu_pids(nvidia_smi: str | None = None) -> set[int] | None:
    """Pids holding GPU memory, as ``nvidia-smi --query-compute-apps=pid`` lists them (None: no
    nvidia-smi here, or it failed: nothing to wait for)."""
    import shutil

    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-compute-apps=pid", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return {int(tok) for tok in out.stdout.split() if tok.strip().isdigit()}


def wait_released(pids: list[int], timeout_s: float = 120.0, poll_s: float = 0.5) -> str | None:
    """Wait until every process of a stopped server is gone and, where nvidia-smi is present, none
    of them holds GPU memory any more (a SIGKILLed process can hold it for seconds), so the next
    server on the same GPUs does not start short of memory. Returns None when released, else what
    still holds on after ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=max(0.0, timeout_s))
    live = sorted(p.pid for p in alive if _running(p))
    if live:
        return f"processes {live} still running"
    mine = set(pids)
    while True:
        held = gpu_pids()
        if held is None or not held & mine:
            return None
        if time.monotonic() > deadline:
            return f"GPU memory still held by pids {sorted(held & mine)} (nvidia-smi)"
        time.sleep(poll_s)


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(proc: subprocess.Popen, alive: list[psutil.Process]) -> None:
    _killpg(proc.pid, signal.SIGKILL)
    for child in alive:  # escaped the group (setsid) or ignored SIGTERM
        try:
            child.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5.0)
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass


def _killpg(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def join_started(thread: threading.Thread | None, timeout: float) -> None:
    """Join ``thread`` if it ever started.

    A Ctrl-C that lands inside ``Thread.start()`` (between the OS thread's creation and its
    "started" signal, or before it) leaves a thread that ``join()`` refuses with RuntimeError
    ("cannot join thread before it is started"); the user's interrupt must end as an interrupt
    (exit 130), not as that error. Such a thread is a daemon reading a pipe: it ends on its own
    when the process it reads is killed, so it is left to do so."""
    if thread is None:
        return
    try:
        thread.join(timeout=timeout)
    except RuntimeError:
        pass

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


def kill_tree(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM ``proc``'s process group, SIGKILL it after ``grace_s``, then any escaped descendant.

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

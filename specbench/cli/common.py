"""Shared CLI plumbing: one place where SpecbenchError becomes one red line and an exit code."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
from typing import Callable, Iterator, TypeVar

import typer
from rich.console import Console

from specbench.errors import SpecbenchError

F = TypeVar("F", bound=Callable[..., object])

console = Console(stderr=False)
err_console = Console(stderr=True)


def debug_enabled() -> bool:
    return os.environ.get("SPECBENCH_DEBUG", "") not in ("", "0")


def handle_errors(fn: F) -> F:
    """Turn SpecbenchError into ``error: <message>`` on stderr and its exit code (2 by default)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SpecbenchError as exc:
            if debug_enabled():
                raise
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread, so ``kill PID`` (a job
    scheduler, ``timeout``, a container stop) takes the same path as Ctrl-C: the server is stopped,
    finished cells are kept, exit 130. A second SIGTERM or Ctrl-C while stopping kills at once."""

    def interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (e.g. an embedding test runner): leave SIGTERM alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()

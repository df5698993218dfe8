"""Shared CLI plumbing: one place where SpecbenchError becomes one red line and an exit code."""

from __future__ import annotations

import functools
import os
import sys
from typing import Callable, TypeVar

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


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()

"""Shared CLI plumbing: one place where SpecbenchError becomes one red line and an exit code."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Callable, Iterator, Optional, TypeVar

import typer
from rich.console import Console

from specbench.errors import EXIT_FAILED_CELLS, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, SpecbenchError
from specbench.io import (
    STANDARD_ERROR,
    STANDARD_OUTPUT,
    clear_stop,
    failed_stream,
    honour_stop,
    on_stream,
    request_stop,
)
from specbench.redact import redact_message
from specbench.render.format import one_line, shown_text, user_line

F = TypeVar("F", bound=Callable[..., object])


def _sane_environ() -> dict[str, str]:
    """The environment rich reads its width from, less a COLUMNS / LINES it would obey to nothing:
    ``COLUMNS=0`` made every error line vanish (rich wraps to width 0). Below 20 columns or not a
    number, the terminal's own size (or 80) is used instead."""
    env = dict(os.environ)
    for name in ("COLUMNS", "LINES"):
        value = env.get(name)
        if value is not None and (not value.strip().isdigit() or int(value) < 20):
            del env[name]
    return env


class _Console(Console):
    def __init__(self, **kw) -> None:
        super().__init__(_environ=_sane_environ(), **kw)

    def on_broken_pipe(self) -> None:
        # rich's own exits 1, the regression code; the contract decides instead (describe_failure).
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE), STANDARD_ERROR if self.stderr else STANDARD_OUTPUT)


class _ErrConsole(_Console):
    def print(self, *args, **kwargs) -> None:
        # Standard error that cannot be written (``2> /dev/full``, a closed pipe): nothing more can
        # be said there, and a warning or error line lost is no reason to change the exit code
        # (an uncaught write error ended in 1, the regression code).
        try:
            super().print(*args, **kwargs)
        except OSError:
            _drop_unwritten(self)


def _drop_unwritten(c: Console) -> None:
    """Forget what a failed write left in rich's buffer (the next print would write it again)."""
    with contextlib.suppress(AttributeError):
        del c._buffer[:]


console = _Console(stderr=False, emoji=False)  # "env:X: ..." is an axis, not the :x: emoji
err_console = _ErrConsole(stderr=True, emoji=False)


def debug_enabled() -> bool:
    return os.environ.get("SPECBENCH_DEBUG", "") not in ("", "0")


# The exit-code contract (README "Exit codes"; the codes are errors.py's): CI reads 1 as
# "regression", so nothing else may ever end in 1. Every failure that is not a verdict is a
# usage/input error (2), failed cells (3) or an interruption (130).


def describe_failure(exc: BaseException) -> tuple[int, str]:
    """(exit code, one-line message) for any exception that ends a command: the one place where
    a failure becomes the contract. Messages name the file or what to do; a password in a URL that
    a message quotes (a model or endpoint from the config) is hidden."""
    code, message = _describe(exc)
    return code, redact_message(message)


def _describe(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, SpecbenchError):
        code = exc.exit_code if exc.exit_code in (EXIT_USAGE, EXIT_FAILED_CELLS, EXIT_INTERRUPTED) else EXIT_USAGE
        # specbench's own messages are one line: a newline in one is in a path or value it quotes,
        # shown as \n rather than cutting the line there
        return code, one_line(str(exc).strip())
    if isinstance(exc, (KeyboardInterrupt, typer.Abort)):
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(exc, typer.TyperException) and hasattr(exc, "format_message"):  # click usage errors
        hint = getattr(getattr(exc, "ctx", None), "command_path", None)
        more = f"; see '{hint} --help'" if hint else ""
        return EXIT_USAGE, f"{exc.format_message().rstrip('.')}{more}"
    stream = failed_stream(exc)  # named so only where the stream is written (io, _OwnStdout, the consoles)
    if isinstance(exc, BrokenPipeError) and stream is not None:
        # The reader of standard output went away (``| head``): it had what it wanted; the output
        # ends there and that is no input error (compare keeps its verdict: compare_cmd).
        return EXIT_OK, ""
    if isinstance(exc, OSError) and stream is not None:  # ``> /dev/full``, a terminal gone
        fix = "free space or redirect it elsewhere" if exc.errno in _FULL else "redirect it to a file"
        return EXIT_USAGE, f"{exc.strerror or type(exc).__name__} writing the output to {stream}; {fix}"
    if isinstance(exc, OSError):
        # A name is no evidence either way: a direct write() to a file (a fixture, a server log)
        # fails without one, and is still not standard output's.
        name = exc.filename if exc.filename is not None else ""
        what = exc.strerror or type(exc).__name__
        if isinstance(exc, IsADirectoryError):
            what += " (give a file name, not a directory)"
        fix = "free space and re-run" if exc.errno in _FULL else "check the path and its permissions"
        return EXIT_USAGE, (f"{name}: " if name else "") + f"{what}; {fix}"
    if isinstance(exc, RecursionError):
        return EXIT_USAGE, "input nested too deeply (recursion limit); check the file for runaway nesting"
    if isinstance(exc, MemoryError):
        return EXIT_USAGE, "out of memory reading the input; check its size (or alias bombs in YAML)"
    if isinstance(exc, UnicodeEncodeError):
        return EXIT_USAGE, f"the output cannot be written in its encoding ({exc}); set PYTHONIOENCODING=utf-8"
    if isinstance(exc, UnicodeError):
        return EXIT_USAGE, f"input is not UTF-8 text ({exc}); pass a text file"
    return EXIT_USAGE, (f"unexpected {type(exc).__name__}: {exc}; rerun with --debug for the traceback and report it")


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def silence_stdout() -> None:
    """After a broken pipe: standard output to /dev/null (Python flushes stdout at exit, and into
    the closed pipe that would be a second error)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def print_error(message: str) -> None:
    # One line: the contract promises a single line on stderr (the first line of a multi-line
    # message; --debug shows everything), shown as every user string is (user_line: credentials
    # hidden, control characters visible, markup escaped).
    lines = str(message).strip().splitlines() or ["(no message)"]
    err_console.print(f"[bold red]error:[/] {user_line(lines[0])}", highlight=False, soft_wrap=True)


def handle_errors(fn: F) -> F:
    """Turn any failure into ``error: <one line>`` on stderr and its exit code (see describe_failure)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - this is the one place that maps all of them
            raise typer.Exit(report_failure(exc)) from None

    return wrapper  # type: ignore[return-value]


def report_failure(exc: BaseException) -> int:
    """Say ``exc`` on stderr as the contract says (its traceback first under ``--debug``) and return
    its exit code: ``--debug`` shows more, it never changes the code (an input error stays 2, not
    the 1 of an uncaught exception, which CI reads as a regression)."""
    if debug_enabled() and not isinstance(exc, KeyboardInterrupt):
        import traceback

        with contextlib.suppress(OSError):
            sys.stderr.write(shown_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))
            sys.stderr.flush()
    code, message = describe_failure(exc)
    if failed_stream(exc) is STANDARD_OUTPUT:
        # a reader gone, a full disk: what is left in its buffer would fail again at exit (status 120)
        silence_stdout()
    if code == EXIT_INTERRUPTED:
        err_console.print("[yellow]interrupted[/]")
    elif message:
        print_error(message)
    return code


def speaking_consoles() -> None:
    """Both consoles speak, and hold nothing unwritten, at the start of an invocation: a broken pipe
    quiets one (on_broken_pipe), a failed write leaves its text in rich's buffer, for the rest of
    that invocation, not for the next one an in-process caller (the contract tests run thousands)
    makes."""
    for c in (console, err_console):
        c.quiet = False
        _drop_unwritten(c)


def tolerant_streams() -> None:
    """Standard output and error write what their encoding cannot hold as backslash escapes: under
    ``PYTHONIOENCODING=ascii`` a "·" in a table ended compare with exit 2 after its files were
    written, and the verdict was lost. And standard output is :class:`_OwnStdout`: every write to it
    (rich, click's echo, print, ``--json -``, the final flush) that fails says it was standard output's."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")
    if sys.stdout is not None and not isinstance(sys.stdout, _OwnStdout):
        sys.stdout = _OwnStdout(sys.stdout)


class _OwnStdout:
    """Standard output (or its bytes, ``.buffer``) as the one place it is written: a write or flush
    that fails here, and only here, names standard output (io.on_stream), so describe_failure tells
    ``> /dev/full`` from a full disk met by a direct write() to some other file. Everything else is
    the stream's own."""

    def __init__(self, stream) -> None:
        object.__setattr__(self, "_stream", stream)

    def write(self, data):
        try:
            return self._stream.write(data)
        except OSError as exc:
            on_stream(exc, STANDARD_OUTPUT)
            raise

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            on_stream(exc, STANDARD_OUTPUT)
            raise

    @property
    def buffer(self):
        return _OwnStdout(self._stream.buffer)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._stream, name, value)


def stdout_closed() -> bool:
    """Whether the process started with standard output closed (``>&-``): Python then has no
    ``sys.stdout`` and every command's output would vanish (or fail half-way)."""
    return sys.stdout is None


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread, so ``kill PID`` (a job
    scheduler, ``timeout``, a container stop) takes the same path as Ctrl-C: the server is stopped,
    finished cells are kept, exit 130. A second SIGTERM or Ctrl-C while stopping kills at once."""

    def interrupt(signum, frame):
        request_stop()  # kept too: C extension code can swallow the KeyboardInterrupt (io.honour_stop)
        raise KeyboardInterrupt

    # SIGHUP (terminal closed, SSH lost) too: the servers run in their own sessions and would
    # otherwise outlive specbench. SIGINT (Ctrl-C) raises the same way as Python's own handler does.
    signals = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    clear_stop()
    try:
        previous = {s: signal.signal(s, interrupt) for s in signals}
    except ValueError:  # not the main thread (e.g. an embedding test runner): leave them alone
        yield
        return
    try:
        yield
        honour_stop()  # the command went on to its end after a lost interrupt: it still ends as one
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        clear_stop()


def nonempty_path(text: str) -> Path:
    """A path option's parser: ``--out ""`` is a usage error, not the current directory (which
    ``Path("")`` would silently be)."""
    if not str(text).strip():
        raise typer.BadParameter("is empty; give a directory")
    return Path(text)


def warn(message: str) -> None:
    """``warning: <message>`` on standard error, shown as every user string is (:func:`user_line`);
    a warning that cannot be written (``2> /dev/full``) does not fail the command (_ErrConsole)."""
    err_console.print(f"[yellow]warning:[/] {user_line(message)}", highlight=False, soft_wrap=True)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


# compare and report seed their bootstraps alike
Seed = Annotated[int, typer.Option("--seed", min=0, help="Bootstrap seed (results are deterministic in it).")]

# run and validate take the same overrides, checked alike (run/plan.validated)
SetOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--set",
        metavar="KEY.PATH=VALUE",
        help="Override a config key (repeatable; value read as YAML), checked like the file: --set load.num_requests=40.",
    ),
]


def config_or_default(config: Optional[Path]) -> Path:
    """The study config a command was given, else the default study shipped in the package."""
    if config is not None:
        return config
    from specbench.config import packaged_default_config  # lazy: pulls in numpy and pydantic

    return packaged_default_config()

"""The ``specbench`` Typer app. Each command lives in its own module and is registered here."""

from __future__ import annotations

import atexit
import functools
import os
import sys
from typing import Annotated, NoReturn, Optional

import typer

from specbench import __version__
from specbench.cli import compare_cmd, envs_cmd, fixtures_cmd, parse_cmd, report_cmd, run_cmd, validate_cmd
from specbench.cli.common import (
    print_error,
    report_failure,
    sigterm_as_interrupt,
    silence_stdout,
    speaking_consoles,
    stdout_closed,
    tolerant_streams,
)
from specbench.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from specbench.io import clear_protected

app = typer.Typer(
    name="specbench",
    help="Measure, analyse and gate speculative-decoding acceptance in vLLM.",
    no_args_is_help=False,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module's register(app) adds its command(s). Listed (and shown in --help) in workflow order:
# run, validate, report, compare, parse, fixtures, envs. Plain imports: a missing or broken command
# module is an ImportError at start, never a dropped command.
_COMMANDS = [run_cmd, validate_cmd, report_cmd, compare_cmd, parse_cmd, fixtures_cmd, envs_cmd]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"specbench {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version.")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    if debug:
        os.environ["SPECBENCH_DEBUG"] = "1"
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


for _module in _COMMANDS:
    _module.register(app)


@functools.lru_cache(maxsize=None)
def _command():
    # Building the click command from the Typer app costs ~10 ms; in-process callers (the contract
    # test runs thousands) build it once.
    command = typer.main.get_command(app)
    _quiet_flags(command)
    return command


def _quiet_flags(command) -> None:
    """Boolean flags take no value: --help shows no ``<bool>`` type for them (--help included)."""
    for param in command.params:
        if param.param_type_name == "option" and getattr(param, "is_flag", False) and not getattr(param, "count", 0):
            param.metavar = ""
    make_help = command.get_help_option

    def get_help_option(ctx):
        option = make_help(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        _quiet_flags(sub)


def split_debug(argv: list[str]) -> tuple[list[str], bool]:
    """``--debug`` anywhere before ``--`` (before or after the subcommand) -> (argv without it, True)."""
    end = argv.index("--") if "--" in argv else len(argv)
    head = [a for a in argv[:end] if a != "--debug"]
    return head + argv[end:], len(head) < end


def run_cli(argv: list[str] | None = None) -> int:
    """Run specbench with ``argv`` and return its exit code, never raising: click's usage errors,
    failures outside a command (argument callbacks) and anything a command let through all become
    one line on stderr and a code from the contract (0, 1 regression, 2, 3, 130)."""
    clear_protected()  # the inputs protected are this invocation's (in-process callers run many)
    tolerant_streams()
    speaking_consoles()
    argv, debug = split_debug(list(sys.argv[1:] if argv is None else argv))
    if debug:
        os.environ["SPECBENCH_DEBUG"] = "1"  # before parsing: a usage error under --debug shows its traceback
    if stdout_closed():
        print_error("standard output is closed (>&-); redirect it to a file or to /dev/null")
        return EXIT_USAGE
    streams = (sys.stdout, sys.stderr)
    try:
        # SIGTERM/SIGHUP end every command as Ctrl-C does: partial outputs removed, exit 130
        with sigterm_as_interrupt():
            code = _command().main(args=argv, standalone_mode=False, prog_name="specbench")
    except typer.Exit as exc:
        code = exc.exit_code
    except SystemExit as exc:
        if exc.code == 1 and isinstance(exc.__context__, OSError):
            # typer and click end a broken pipe met outside a command (--help | head) in sys.exit(1),
            # the regression code, and wrap the streams: it is the OSError that decides
            sys.stdout, sys.stderr = streams
            code = report_failure(exc.__context__)
        else:
            code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except BaseException as exc:  # noqa: BLE001 - the contract's last line of defence
        code = report_failure(exc)
    code = code if isinstance(code, int) else EXIT_OK
    return _flushed(code)


def _flushed(code: int) -> int:
    """``code`` once what standard output still buffers is written: a full disk met here, not
    while Python flushes at exit (which ends in status 120), says so in one line and exit 2 where
    the command would have ended in 0; a verdict or failure already decided (and said) stands."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BaseException as exc:  # noqa: BLE001 - as run_cli's: every failure is the contract's
        if code == EXIT_OK:
            return report_failure(exc)
        silence_stdout()
    return code


def main() -> None:
    code = run_cli()
    if code == EXIT_INTERRUPTED:
        exit_interrupted()
    sys.exit(code)


def exit_interrupted() -> NoReturn:
    """End the process with exit 130 after an interrupt that specbench handled.

    CPython (3.11, seen here 1 run in ~60) can still end such a process by SIGINT (status -2, not
    130): a KeyboardInterrupt raised while an extension module ran code through ``PyRun_String``
    sets the interpreter's "unhandled KeyboardInterrupt" flag, and ``Py_RunMain`` reads that flag
    after ``sys.exit`` and kills the process with SIGINT although the exception was caught. So the
    interrupted path leaves without the interpreter's epilogue: the exit handlers run, the streams
    are flushed, then ``os._exit``. Everything specbench writes is already atomic and complete."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()

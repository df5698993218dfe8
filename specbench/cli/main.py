"""The ``specbench`` Typer app. Each command lives in its own module and is registered here."""

from __future__ import annotations

import importlib
import os
from typing import Annotated, Optional

import typer

from specbench import __version__

app = typer.Typer(
    name="specbench",
    help="Measure, analyse and gate speculative-decoding acceptance in vLLM.",
    no_args_is_help=False,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# (module, attribute) pairs; each module defines a function registered as a command.
_COMMANDS = [
    ("specbench.cli.parse_cmd", "register"),
    ("specbench.cli.report_cmd", "register"),
    ("specbench.cli.run_cmd", "register"),
    ("specbench.cli.compare_cmd", "register"),
    ("specbench.cli.fixtures_cmd", "register"),
]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"specbench {__version__}")
        raise typer.Exit(0)


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


for _module, _attr in _COMMANDS:
    try:
        _mod = importlib.import_module(_module)
    except ModuleNotFoundError as _exc:  # a command module not written yet
        if _exc.name != _module:
            raise
        continue
    getattr(_mod, _attr)(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""``specbench envs list|rm``: the vLLM environments the ``vllm`` axis created (specbench/serve/installs.py)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli.common import handle_errors
from specbench.errors import ConfigError
from specbench.render.format import shown_text
from specbench.serve.installs import environments, envs_root, remove

envs_app = typer.Typer(
    help="List or remove the vLLM environments a study's vllm axis created ($SPECBENCH_ENVS_DIR, ~/.cache/specbench/envs).",
    no_args_is_help=True,
)


@envs_app.command("list")
@handle_errors
def list_envs() -> None:
    """One line per environment: key, ready or not, vLLM version, size, requirement."""
    rows = environments()
    if not rows:
        typer.echo(f"no environments in {shown_text(envs_root())}")
        return
    typer.echo(f"{'key':<16}  {'state':<10}  {'vLLM':<10}  {'size':>8}  requirement")
    for r in rows:
        state = "ready" if r["ready"] else "unfinished"
        size = f"{r['bytes'] / 2**30:.2f} GiB"
        typer.echo(f"{r['key']:<16}  {state:<10}  {r['version'] or '-':<10}  {size:>8}  {r['requirement'] or '-'}")
    typer.echo(f"({len(rows)} in {shown_text(envs_root())})")


@envs_app.command("rm")
@handle_errors
def rm(
    keys: Annotated[
        Optional[list[str]], typer.Argument(metavar="KEY...", help="Keys `specbench envs list` shows.")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Remove every environment.")] = False,
) -> None:
    """Remove environments (a later run that names their install creates them again)."""
    if bool(keys) == all_:
        raise ConfigError("envs rm: give the KEYs of the environments to remove, or --all")
    for key in [r["key"] for r in environments()] if all_ else list(keys or []):
        typer.echo(f"removed {shown_text(remove(key))}")


def register(app: typer.Typer) -> None:
    app.add_typer(envs_app, name="envs")

"""``specbench fixtures build|path``: the tiny DeepSeek-V3 target + EAGLE head used by tests and demos."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from specbench.cli.common import handle_errors
from specbench.fixtures import build_fixtures, fixture_paths
from specbench.fixtures.build import is_complete

fixtures_app = typer.Typer(
    help="Build or locate the tiny local DeepSeek-V3 target and its EAGLE head.", no_args_is_help=True
)

CacheDir = Annotated[
    Optional[Path],
    typer.Option("--cache-dir", help="Cache root (default $SPECBENCH_CACHE/fixtures or ~/.cache/specbench/fixtures)."),
]


def _print(paths) -> None:
    typer.echo(f"target:    {paths.target}")
    typer.echo(f"draft:     {paths.draft}")
    typer.echo(f"tokenizer: {paths.tokenizer}")


@fixtures_app.command("build")
@handle_errors
def build(
    cache_dir: CacheDir = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the cache entry exists.")] = False,
) -> None:
    """Build the models into the cache (a no-op when already built) and print their paths."""
    _print(build_fixtures(cache_dir=cache_dir, force=force))


@fixtures_app.command("path")
@handle_errors
def path(cache_dir: CacheDir = None) -> None:
    """Print where the models are (or would be) cached; builds nothing."""
    paths = fixture_paths(cache_dir)
    _print(paths)
    if not is_complete(paths):
        typer.echo("(not built yet: run `specbench fixtures build`)", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(fixtures_app, name="fixtures")

"""``specbench fixtures build|path``: the tiny DeepSeek-V3 targets and heads used by tests, demos and
the shipped configs (every ``fixture:*`` reference, :data:`specbench.fixtures.FIXTURE_REFS`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from specbench.cli.common import handle_errors
from specbench.errors import ConfigError
from specbench.fixtures import FIXTURE_REFS, build_fixtures, fixture_paths
from specbench.fixtures.build import is_complete
from specbench.render.format import shown_text

fixtures_app = typer.Typer(
    help="Build or locate the tiny local DeepSeek-V3 targets and their draft heads (every fixture:* a config names).",
    no_args_is_help=True,
)
KINDS = list(dict.fromkeys(kind for kind, _ in FIXTURE_REFS.values()))  # default, heads, margin, eagle3, pays

CacheDir = Annotated[
    Optional[Path],
    typer.Option("--cache-dir", help="Cache root (default $SPECBENCH_CACHE/fixtures or ~/.cache/specbench/fixtures)."),
]


Kinds = Annotated[
    Optional[list[str]],
    typer.Option(
        "--fixture",
        metavar="KIND",
        help=f"Only this fixture ({', '.join(KINDS)}; repeatable). Default: all of them.",
        show_default=False,
    ),
]


def _kinds(wanted: list[str] | None) -> list[str]:
    for kind in wanted or []:
        if kind not in KINDS:
            raise ConfigError(f"fixtures: --fixture {kind!r} is not a fixture; give one of {', '.join(KINDS)}")
    return list(dict.fromkeys(wanted)) if wanted else KINDS


_WIDTH = max(len(ref) for ref in FIXTURE_REFS) + 2  # the references' column, then two spaces


def _print(kind: str, root: Path) -> None:
    """One line per ``fixture:*`` reference of ``kind``: the reference a config names and its directory."""
    for ref, (k, role) in FIXTURE_REFS.items():
        if k == kind:
            typer.echo(f"{ref:<{_WIDTH}}{shown_text(root / role)}")


@fixtures_app.command("build")
@handle_errors
def build(
    cache_dir: CacheDir = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the cache entry exists.")] = False,
    fixture: Kinds = None,
) -> None:
    """Build the models into the cache (a no-op for those already built) and print each
    fixture:* reference with its path."""
    for kind in _kinds(fixture):
        _print(kind, build_fixtures(cache_dir=cache_dir, force=force, kind=kind).root)


@fixtures_app.command("path")
@handle_errors
def path(cache_dir: CacheDir = None, fixture: Kinds = None) -> None:
    """Print each fixture:* reference with where it is (or would be) cached; builds nothing."""
    missing = []
    for kind in _kinds(fixture):
        paths = fixture_paths(cache_dir, kind)
        _print(kind, paths.root)
        if not is_complete(paths):
            missing.append(kind)
    if missing:
        flags = " ".join(f"--fixture {k}" for k in missing)
        typer.echo(f"(not built yet: {', '.join(missing)}; run `specbench fixtures build {flags}`)", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(fixtures_app, name="fixtures")

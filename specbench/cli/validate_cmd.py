"""``specbench validate``: check a study config without running anything (exit 0 valid, 2 invalid)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from specbench.cli.common import SetOption, config_or_default, console, handle_errors
from specbench.render.format import user_line


def validate(
    config: Annotated[
        Optional[Path],
        typer.Argument(
            metavar="CONFIG", help="Study config (YAML); default: the built-in default study.", show_default=False
        ),
    ] = None,
    overrides: SetOption = None,
) -> None:
    """Check a study config without running anything (exit 0 valid, 2 invalid)."""
    from specbench.run.plan import validated  # lazy: pulls in numpy and pydantic

    path = config_or_default(config)
    _, cells = validated(path, tuple(overrides or ()))  # the same checks, and refusals, as run and --dry-run
    spec = sum(1 for c in cells if not c.is_baseline)
    console.print(
        f"{user_line(path)}: ok ({len(cells)} cells: {spec} speculative, {len(cells) - spec} baseline)",
        highlight=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    app.command("validate")(handle_errors(validate))

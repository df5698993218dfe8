"""Option types that several commands declare alike: one declaration keeps their flags, bounds and
help text from drifting apart."""

from __future__ import annotations

from typing import Annotated

import typer

Seed = Annotated[int, typer.Option("--seed", min=0, help="Bootstrap seed (results are deterministic in it).")]

"""The committed default-study run and ``specbench compare`` as tests call it on copies of it."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from specbench.cli.main import app

BASELINE = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
SPEC_CELLS = [f"mla-{mla}__output_norm-{norm}__r0" for mla in ("on", "off") for norm in ("on", "logits-only", "off")]


def run(*args, columns: int = 200) -> tuple[int, str]:
    """``specbench compare ARGS...`` in process: (exit code, output)."""
    result = CliRunner().invoke(app, ["compare", *map(str, args)], env={"COLUMNS": str(columns)})
    return result.exit_code, result.output


def copy_run(dst: Path, source: Path = BASELINE) -> Path:
    """A copy of a committed run without its logs and scrapes (compare reads neither)."""
    shutil.copytree(source, dst, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    return dst

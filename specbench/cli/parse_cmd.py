"""``specbench parse FILE...``: print the canonical records found in logs and /metrics scrapes."""

from __future__ import annotations

import csv
import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from specbench.cli.common import console, handle_errors, warn

TABLE_COLUMNS = ("file", "line", "source", "format", "engine", "num_drafts", "draft_tokens", "accepted_tokens",
                 "mean_acceptance_length", "draft_acceptance_rate", "per_position_acceptance")


class OutputFormat(str, Enum):
    table = "table"
    jsonl = "jsonl"
    csv = "csv"


def register(app: typer.Typer) -> None:
    @app.command("parse")
    @handle_errors
    def parse(
        files: Annotated[list[Path], typer.Argument(help="Log files, /metrics scrapes, printed summaries or `vllm bench serve` result JSON.")],
        fmt: Annotated[OutputFormat, typer.Option("--format", help="table, jsonl (canonical records) or csv.")] = OutputFormat.table,
        include_engine_stats: Annotated[bool, typer.Option("--engine-stats", help="Also print Engine throughput records.")] = False,
        strict: Annotated[bool, typer.Option("--strict", help="Exit 2 (input error) when a file has no metrics.")] = False,
    ) -> None:
        """Parse speculative-decoding metrics from any vLLM/SGLang version into canonical records."""
        from specbench.metrics.parse import parse_file, without_gc

        results = [parse_file(f) for f in files]  # InputError (exit 2) for an unreadable path
        empty = False
        rows = []
        for res in results:
            for w in res.warnings:
                warn(w)
            empty |= not any(r.kind == "spec_decode" for r in res.records)
            rows.extend(without_gc(lambda: [r.to_dict() for r in res.records  # noqa: B023 - called at once
                                            if include_engine_stats or r.kind == "spec_decode"]))
        if fmt is OutputFormat.jsonl:
            out = sys.stdout
            for row in rows:
                out.write(json.dumps(row) + "\n")
        elif fmt is OutputFormat.csv:
            names = list(rows[0].keys()) if rows else list(TABLE_COLUMNS)
            writer = csv.DictWriter(sys.stdout, fieldnames=names, extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: (json.dumps(v) if isinstance(v, list) else v) for k, v in row.items()})
        else:
            _render_table(rows)
        if strict and empty:
            # An input without metrics is an input error (2), not a regression verdict (1).
            raise typer.Exit(2)


def _render_table(rows: list[dict]) -> None:
    from rich.table import Table

    table = Table(title=f"{len(rows)} record(s)", show_lines=False)
    for col in TABLE_COLUMNS:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*[_cell(row.get(c)) for c in TABLE_COLUMNS])
    console.print(table)


def _cell(v: object) -> str:
    from specbench.render import format as fmt

    if isinstance(v, list):
        return ", ".join(fmt.short(x, 3) for x in v)
    return fmt.short(v)

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
from specbench.metrics.parse import SPEC_JSON_HEAD, no_spec_data, parse_file, without_gc
from specbench.render import format as render_format

TABLE_COLUMNS = (
    "file",
    "line",
    "source",
    "format",
    "engine",
    "num_drafts",
    "draft_tokens",
    "accepted_tokens",
    "mean_acceptance_length",
    "draft_acceptance_rate",
    "per_position_acceptance",
)


class OutputFormat(str, Enum):
    table = "table"
    jsonl = "jsonl"
    csv = "csv"


def parse(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILES",
            help="Log files, /metrics scrapes, printed summaries or `vllm bench serve` result JSON.",
        ),
    ],
    fmt: Annotated[
        OutputFormat, typer.Option("--format", help="table, jsonl (canonical records) or csv.")
    ] = OutputFormat.table,
    include_engine_stats: Annotated[
        bool, typer.Option("--engine-stats", help="Also print Engine throughput records.")
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Exit 2 (input error) when any file has no metrics (without it: when no file has any)."
        ),
    ] = False,
) -> None:
    """Parse speculative-decoding metrics from any vLLM/SGLang version into canonical records."""
    as_json = fmt is OutputFormat.jsonl  # records come back as their JSON lines
    # InputError (exit 2) for an unreadable path
    results = [parse_file(f, engine_stats=include_engine_stats, as_json=as_json) for f in files]
    without: list[Path] = []  # the files without a spec-decode record
    for f, res in zip(files, results):
        for w in res.warnings:
            warn(w)
        if not any(
            r.startswith(SPEC_JSON_HEAD) if isinstance(r, str) else r.kind == "spec_decode" for r in res.records
        ):
            without.append(f)
    # An input without metrics is an input error (2), never an empty table with exit 0 that reads
    # as a result: when no file has any, and under --strict when one lacks them; nothing is written.
    if len(without) == len(files) or (strict and without):
        raise no_spec_data(without)
    if fmt is OutputFormat.jsonl:
        without_gc(lambda: _write_jsonl([res.records for res in results]))
    else:
        _write_rows(without_gc(lambda: [r.to_dict() for res in results for r in res.records]), fmt)


def register(app: typer.Typer) -> None:
    app.command("parse")(handle_errors(parse))


def _write_jsonl(line_lists: list[list[str]]) -> None:
    """The records' JSON lines (byte for byte json.dumps of each record's to_dict), in blocks so
    each write call carries many."""
    out = sys.stdout
    for lines in line_lists:
        for i in range(0, len(lines), 4096):
            out.write("\n".join(lines[i : i + 4096]) + "\n")


def _write_rows(rows: list[dict], fmt: OutputFormat) -> None:
    if fmt is OutputFormat.csv:
        names = list(rows[0].keys()) if rows else list(TABLE_COLUMNS)
        writer = csv.DictWriter(sys.stdout, fieldnames=names, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (json.dumps(v) if isinstance(v, list) else v) for k, v in row.items()})
    else:
        _render_table(rows)


def _render_table(rows: list[dict]) -> None:
    """One table per file, the file named in its title (not a column folded over 14 lines): line,
    engine, counts, AL, DAR and p_i each in its own column."""
    from rich.table import Table

    by_file: dict[str, list[dict]] = {}
    for row in rows:
        by_file.setdefault(str(row.get("file") or "-"), []).append(row)
    if not rows:
        console.print("0 record(s)", highlight=False)
    for file, recs in by_file.items():
        k = max((len(r.get("per_position_acceptance") or []) for r in recs), default=0)
        formats = sorted({str(r.get("format")) for r in recs})
        engines = {r.get("engine") for r in recs}
        one = len({r.get("kind") for r in recs}) == 1
        title = f"{_shown(file)}: {len(recs)} record(s), {', '.join(formats)}"
        table = Table()
        columns: list[tuple[str, list[str]]] = [("line", [render_format.short(r.get("line")) for r in recs])]
        if not one:
            columns.append(("kind", [str(r.get("kind")).split("_")[0] for r in recs]))
        if len(engines) > 1:
            columns.append(("engine", [render_format.short(r.get("engine")) for r in recs]))
        for name, key in (("drafts", "num_drafts"), ("drafted", "draft_tokens"), ("accepted", "accepted_tokens")):
            columns.append((name, [render_format.short(r.get(key)) for r in recs]))
        derived = [_derived(r) for r in recs]
        k = max(k, max((len(d["p"]) for d in derived), default=0))
        columns.append(("AL", [_shown_value(r, d, "mean_acceptance_length", "al", 2) for r, d in zip(recs, derived)]))
        columns.append(("DAR", [_shown_value(r, d, "draft_acceptance_rate", "dar", 3) for r, d in zip(recs, derived)]))
        columns += [(f"p_{i}", [_position(r, d, i) for r, d in zip(recs, derived)]) for i in range(k)]
        columns = [
            (n, v) for n, v in columns if any(x != render_format.MISSING for x in v)
        ]  # nothing to show: no column
        if len(recs) > RICH_TABLE_MAX_ROWS:
            _plain_table(title, columns)
            continue
        for name, _ in columns:
            table.add_column(name, justify="right", no_wrap=True)
        for i in range(len(recs)):
            table.add_row(*(v[i] for _, v in columns))
        console.print(title, markup=False, highlight=False, soft_wrap=True)  # a path: no markup, never broken mid-word
        console.print(table)
        if any(DERIVED in x for _, v in columns for x in v):
            console.print(f"{DERIVED} derived from the record's counts: {DERIVED_HOW}", highlight=False, style="dim")


# A /metrics scrape carries counts only; the record keeps them as printed (docs/contracts.md), and
# the table derives the rates from them, marked so.
DERIVED = "*"
DERIVED_HOW = "AL = 1 + accepted / drafts, DAR = accepted / drafted, p_i = accepted at position i / drafts"


def _derived(r: dict) -> dict:
    d, t, a, per = (r.get(key) for key in ("num_drafts", "draft_tokens", "accepted_tokens", "accepted_per_position"))
    drafts = d if isinstance(d, int) and d > 0 else None
    accepted = a if isinstance(a, int) else None
    return {
        "al": 1 + accepted / drafts if drafts and accepted is not None else None,
        "dar": accepted / t if isinstance(t, int) and t > 0 and accepted is not None else None,
        "p": [x / drafts for x in per] if drafts and isinstance(per, list) else [],
    }


def _shown_value(r: dict, d: dict, key: str, derived: str, digits: int) -> str:
    if r.get(key) is not None:
        return render_format.num(r.get(key), digits)
    return render_format.num(d[derived], digits) + DERIVED if d[derived] is not None else render_format.MISSING


def _position(r: dict, d: dict, i: int) -> str:
    printed = list(r.get("per_position_acceptance") or [])
    if i < len(printed):
        return render_format.num(printed[i], 3)
    return render_format.num(d["p"][i], 3) + DERIVED if i < len(d["p"]) else render_format.MISSING


# rich lays out a boxed table at about 2 ms a row (100k records: minutes); past this many rows
# the same columns are printed as plain right-aligned text, as fast as jsonl.
RICH_TABLE_MAX_ROWS = 1000


def _plain_table(title: str, columns: list[tuple[str, list[str]]]) -> None:
    widths = [max(len(name), *(len(x) for x in values)) for name, values in columns]
    out = sys.stdout
    console.file.flush()
    out.write(title + "\n" + "  ".join(n.rjust(w) for (n, _), w in zip(columns, widths)) + "\n")
    rows = zip(*(values for _, values in columns))
    block: list[str] = []
    for row in rows:
        block.append("  ".join(x.rjust(w) for x, w in zip(row, widths)))
        if len(block) == 4096:
            out.write("\n".join(block) + "\n")
            block = []
    if block:
        out.write("\n".join(block) + "\n")


def _shown(file: str) -> str:
    """The path as given, relative to the working directory when under it (shorter to read), on
    one line and shown as every user string is (credentials hidden, control characters visible)."""
    try:
        file = str(Path(file).resolve().relative_to(Path.cwd()))
    except ValueError:
        pass
    return render_format.shown_text(render_format.one_line(file))

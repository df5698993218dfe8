"""The study pages (docs/studies/*.md) say "every number on this page is printed by that command":
their acceptance tables are checked here against what `specbench report` prints now for the
committed runs the page's command names (the report's own summary.md tables, built in-process with
the command's defaults: 2000 resamples, seed 0).

A doc table is checked column by column. A row is a report cell when its first column is the cell's
title in the report, or when its `drafts` column holds a number of drafts that exactly one cell of
the report has (pages name cells in their own words: "`eagle` (shipped)"). In every column that
shares a name with the report's acceptance tables (`| cell | units | drafts | AL | DAR | p_0 |
...`; "AL [95% CI]" is AL), the doc's value must be the report's, or its point estimate alone for
tables that show points without intervals. A change of interval method, or of a cell's counts, then fails here until
the page is regenerated: the pages once kept the retired jackknife-t, zero-width intervals and all."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from specbench.report.assemble import build_report, render_markdown

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs" / "studies").glob("*.md"))


def _report_inputs(text: str) -> list[Path]:
    """The inputs of the first `specbench report` command in the page's code blocks."""
    for line in text.splitlines():
        argv = shlex.split(line.strip()) if "specbench report" in line else []
        if argv:
            args = argv[argv.index("report") + 1 :]
            inputs = args[: args.index("--out")] if "--out" in args else args
            return [ROOT / a for a in inputs]
    raise AssertionError("no `specbench report` command in the page")


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Markdown tables: (header cells, rows of cells), separator lines left out."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    block: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                block.append(cells)
        elif block:
            tables.append((block[0], block[1:]))
            block = []
    return tables


def _column(name: str) -> str:
    return re.sub(r"\s*\[95% CI\]$", "", name)


def _report_values(summary: str) -> dict[tuple[str, str], str]:
    """(cell title, column) -> value from the report's acceptance tables."""
    values: dict[tuple[str, str], str] = {}
    for header, rows in _tables(summary):
        if header[:3] == ["cell", "units", "drafts"]:
            for row in rows:
                values.update({(row[0], col): val for col, val in zip(header[1:], row[1:])})
    return values


@pytest.mark.heavy
@pytest.mark.parametrize("doc", DOCS, ids=[d.stem for d in DOCS])
def test_study_page_tables_are_what_the_report_prints(doc: Path):
    text = doc.read_text()
    report = build_report(_report_inputs(text))
    truth = _report_values(render_markdown(report, plots=False))
    assert truth, "the report printed no acceptance table"
    by_drafts: dict[str, list[str]] = {}
    for (cell, col), value in truth.items():
        if col == "drafts":
            by_drafts.setdefault(value, []).append(cell)
    checked, wrong = 0, []
    for header, rows in _tables(text):
        columns = [_column(c) for c in header]
        if "category" in columns:  # a cell split by category: checked against the report's own table
            wrong += _category_rows_differ(header, rows, render_markdown(report, plots=False))
            continue
        for row in rows:
            cell = row[0]
            if (cell, "AL") not in truth and "drafts" in columns and len(row) == len(columns):
                same = by_drafts.get(row[columns.index("drafts")], [])
                cell = same[0] if len(same) == 1 else cell
            for col, shown in zip(columns[1:], row[1:]):
                expected = truth.get((cell, col))
                if expected is None:
                    continue
                checked += 1
                if shown not in (expected, expected.split(" [")[0]):
                    wrong.append(f"{row[0]} ({cell}) / {col}: page {shown!r}, report {expected!r}")
    assert not wrong, f"{doc.relative_to(ROOT)} differs from `specbench report`:\n" + "\n".join(wrong)
    assert checked >= 10, f"{doc.relative_to(ROOT)}: only {checked} values matched a report cell"


def _category_rows_differ(header: list[str], rows: list[list[str]], summary: str) -> list[str]:
    """A page's per-category rows that are not rows of the report's "Acceptance by prompt category"
    table (same header), each named."""
    for h, truth in _tables(summary):
        if h == header:
            return [f"category row {' | '.join(r)}: not in the report" for r in rows if r not in truth]
    return [f"category table {header}: the report has none with that header"]

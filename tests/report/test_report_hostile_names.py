"""A value read from an input run (an axis value, so every cell title built from it) holding "|",
a newline, an ESC sequence and rich markup stays one value in every output `report` writes: the
Markdown tables keep their columns, no line of the summary or the screen starts with the injected
text, no raw control character reaches either, the plots' labels are one line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "baselines" / "cpu-default"
HOSTILE = "on|x\nFAKE: all gates passed\x1b[31m[bold]<img src=http://x/y onerror=alert(1)>"


def _table_widths(md: str) -> list[set[int]]:
    """For each Markdown table, the set of column counts of its rows (unescaped | separators)."""
    tables, block = [], []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            block.append(len(re.findall(r"(?<!\\)\|", line)))
        elif block:
            tables.append(set(block))
            block = []
    return tables


@pytest.mark.heavy
def test_a_hostile_axis_value_stays_one_value(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    cell = run / "mla-on__output_norm-on__r0" / "cell.json"
    record = json.loads(cell.read_text())
    record["axes"]["output_norm"] = HOSTILE
    cell.write_text(json.dumps(record))
    out = tmp_path / "report"
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "report", str(run), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    md = (out / "summary.md").read_text()
    assert "\\|x\\nFAKE: all gates passed\\x1b[31m[bold]<img src=http://x/y" in md  # shown, escaped, in a table cell
    for text in (md, r.stdout, r.stderr):
        assert "\x1b" not in text
        assert not any(line.lstrip("│┃ ").startswith("FAKE") for line in text.splitlines())
    assert all(len(widths) == 1 for widths in _table_widths(md)), _table_widths(md)
    assert "Glyph 27" not in r.stderr  # no ESC handed to matplotlib either
    svg = (out / "per_position.svg").read_text()
    assert "FAKE" in svg and "\x1b" not in svg
    # index.html shows the value as text: the markup in it is escaped, never an element
    page = (out / "index.html").read_text()
    assert "&lt;img src=http://x/y onerror=alert(1)&gt;" in page and "\x1b" not in page
    assert re.findall(r"<img [^>]*", page) and all(
        tag.startswith('<img src="data:image/svg+xml;base64,') for tag in re.findall(r"<img [^>]*", page)
    )


def test_the_report_table_writer_escapes_what_it_is_given():
    """The writer itself, for text that reaches it without a cell title (headers, file names)."""
    from specbench.report.assemble import _md_table

    md = _md_table(["cell|x", "AL"], [["a\nFAKE | b", "2.0\x1b[31m"]])
    assert md.splitlines() == ["| cell\\|x | AL |", "|---|---|", "| a FAKE \\| b | 2.0\\x1b[31m |"]


@pytest.mark.heavy
def test_a_credential_in_the_run_path_reaches_no_file_report_writes(tmp_path):
    """The run's path as given holds a URL password (as pathlib folds https://u:pw@h/...) and a
    token as a folder name: summary.md, the CSVs, index.html and the screen name the run with both
    hidden (before: summary.md's "Inputs:" and each "Run ...:" heading wrote them as given)."""
    password, token = "PWSECRET99", "hf_" + "Zq7" * 8
    given = Path("https:", f"u:{password}@h", token, "run")
    shutil.copytree(RUN, tmp_path / given, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "report", str(given), "--out", "rep", "--no-plots"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    written = {p: p.read_text(errors="replace") for p in (tmp_path / "rep").rglob("*") if p.is_file()}
    assert written and "Inputs: https:/u:***@h/***/run" in written[tmp_path / "rep" / "summary.md"]
    for text in [*written.values(), r.stdout, r.stderr]:
        assert password not in text and token not in text

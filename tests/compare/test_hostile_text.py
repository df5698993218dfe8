"""User text is text (issue 43): an axis value read from a run that holds rich markup, a Markdown
pipe, a newline, ESC, a vertical tab and NUL reaches every output of `compare` as what it is:
shown visibly, the Markdown tables keep their rows, no line can be injected, the JUnit XML parses."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from realruns import copy_run, run

HOSTILE = "on[/][bold]|\n\x1b[31mFAKE: all gates passed\x0b\x00"
CELL = "mla-on__output_norm-on__r0"


def _hostile_copy(dst):
    run_dir = copy_run(dst)
    f = run_dir / CELL / "cell.json"
    rec = json.loads(f.read_text())
    rec["axes"]["output_norm"] = HOSTILE
    f.write_text(json.dumps(rec))
    return run_dir


def test_hostile_axis_value_in_every_compare_output(tmp_path):
    base, cand = _hostile_copy(tmp_path / "base"), _hostile_copy(tmp_path / "cand")
    md, junit = tmp_path / "gate.md", tmp_path / "junit.xml"
    code, out = run(base, cand, "--gate", "acceptance_length:-50%", "--markdown", md, "--junit", junit, "--verbose")
    assert code in (0, 1, 3), out  # a verdict, not a masked crash ("unexpected MarkupError": exit 2)
    assert "\x1b" not in out and "\x00" not in out and "\x0b" not in out
    assert "\\x1b[31m" in out and "[/][bold]" in out  # shown as written, not interpreted
    text = md.read_text()
    assert "\x1b" not in text and "\x00" not in text
    assert not any(line.startswith("FAKE") for line in text.splitlines())
    grid = [line for line in text.split("Gate checks per cell")[1].split("\n\n")[1].splitlines()]
    cells = [len(re.split(r"(?<!\\)\|", line)) for line in grid]  # columns: split on unescaped pipes
    assert len(grid) == 2 + 6 and set(cells) == {cells[0]}, grid
    root = ET.parse(junit).getroot()  # well-formed XML 1.0
    names = [c.get("classname") for c in root.iter("testcase")]
    assert any("\\x1b" in n and "\\x00" in n for n in names), names

"""`specbench parse`'s table at 80 columns: one line per record, the file in the title, no folded
path column (a real vLLM v1 server log)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from specbench.cli.main import app

LOG = Path(__file__).resolve().parents[1] / "analysis" / "data" / "real_v1_server.log"


def test_one_line_per_record_at_80_columns():
    res = CliRunner().invoke(app, ["parse", str(LOG)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    body = [line for line in res.output.splitlines() if line.startswith("│")]
    assert len(body) == 6  # 6 SpecDecoding lines, none folded
    assert [c.strip() for c in body[0].split("│")[1:4]] == ["136", "156", "74"]  # line, drafted, accepted
    assert "2.42" in body[0] and "0.615" in body[0]  # AL and p_0 whole, in their own columns
    assert "real_v1_server.log: 6 record(s)" in res.output and max(map(len, res.output.splitlines())) <= 80

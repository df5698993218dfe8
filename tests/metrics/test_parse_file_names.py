"""`specbench parse` names each record's file as every output shows a user-given path: a
credential in it (a token as a folder name, a URL's password) never reaches the JSON Lines, the CSV
or the table; the records are the same as those of the same file under a plain name."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from specbench.cli.main import run_cli

ROOT = Path(__file__).resolve().parents[2]
CELL = ROOT / "results" / "baselines" / "cpu-gate"
TOKEN = "hf_" + "Ab3" * 8  # credential-shaped: hf_ and 24 letters and digits
SOURCES = [
    next(CELL.glob("*/server.log")),
    next(CELL.glob("*/metrics_after.prom")),
    next((ROOT / "tests" / "metrics" / "data" / "vllm_bench").glob("*.json")),
]


def _parse(path: Path, fmt: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli(["parse", str(path), "--format", fmt])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_a_token_in_the_path_is_hidden_in_every_format_and_the_records_are_unchanged(source, tmp_path):
    plain, hostile = tmp_path / "plain" / source.name, tmp_path / TOKEN / source.name
    for p in (plain, hostile):
        p.parent.mkdir()
        shutil.copy(source, p)
    for fmt in ("jsonl", "csv", "table"):
        code, out, err = _parse(hostile, fmt)
        assert code == 0 and TOKEN not in out + err, fmt
        assert str(hostile.parent.parent) in out, fmt  # the rest of the path is still named
    code, out, _ = _parse(hostile, "jsonl")
    _, plain_out, _ = _parse(plain, "jsonl")
    rows, plain_rows = [json.loads(x) for x in out.splitlines()], [json.loads(x) for x in plain_out.splitlines()]
    assert rows and [{**r, "file": None} for r in rows] == [{**r, "file": None} for r in plain_rows]

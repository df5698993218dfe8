"""``specbench report`` on every committed baseline writes exactly the files it wrote when they were
last reviewed (tests/report/golden/<baseline>/): a restructuring that changes what a reader sees, one
digit of one table, fails here with the file and the first line that differs.

The reports are made with ``--no-plots`` (the figures' pixels depend on matplotlib's version and
fonts; what they draw comes from the same frames as the tables and CSVs compared here), from the
repository root with the run named by its relative path, so the files hold no machine's paths.

The CSVs hold full-precision floats, whose last bits follow numpy's and pandas' summation order
(a fresh install's newer releases moved some in the 17th digit): a number there is the same when it agrees to 12
significant digits, which every rounded figure a reader sees (summary.md, index.html: compared
byte for byte) shows unchanged. Any other text in a CSV is compared exactly.

A deliberate change of the report regenerates them: ``SPECBENCH_UPDATE_GOLDEN=1 .venv/bin/python -m
pytest -q -n0 tests/report/test_report_golden.py``; the diff of tests/report/golden/ is then what a
reviewer reads as the change users will see.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import os
import shutil
from pathlib import Path

import pytest

from specbench.cli.main import run_cli

ROOT = Path(__file__).resolve().parents[2]
BASELINES = sorted(p.name for p in (ROOT / "results" / "baselines").iterdir() if (p / "manifest.json").is_file())
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SPECBENCH_UPDATE_GOLDEN") == "1"


def _files(d: Path) -> dict[str, str]:
    return {p.relative_to(d).as_posix(): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _same_cell(want: str, got: str) -> bool:
    if want == got:
        return True
    a, b = _number(want), _number(got)
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def _same(file: str, want: str, got: str) -> bool:
    """Byte for byte, except the floats of a CSV (to 12 significant digits: see the docstring)."""
    if want == got:
        return True
    if not file.endswith(".csv"):
        return False
    rows_w, rows_g = list(csv.reader(io.StringIO(want))), list(csv.reader(io.StringIO(got)))
    return len(rows_w) == len(rows_g) and all(
        len(rw) == len(rg) and all(_same_cell(w, g) for w, g in zip(rw, rg)) for rw, rg in zip(rows_w, rows_g)
    )


def test_every_baseline_is_covered() -> None:
    assert BASELINES, "no committed baseline found under results/baselines"
    assert sorted(p.name for p in GOLDEN.iterdir()) == BASELINES, "regenerate: SPECBENCH_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", BASELINES)
def test_report_of_a_committed_baseline_is_unchanged(name: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    out = tmp_path / "report"
    assert run_cli(["report", f"results/baselines/{name}", "--out", str(out), "--no-plots"]) == 0
    got = _files(out)
    assert got and all(str(tmp_path) not in text for text in got.values()), "a report file holds the tmp path"
    if UPDATE:
        shutil.rmtree(GOLDEN / name, ignore_errors=True)
        shutil.copytree(out, GOLDEN / name)
    want = _files(GOLDEN / name)
    assert sorted(got) == sorted(want), f"{name}: files written differ from tests/report/golden/{name}"
    for file, text in want.items():
        if not _same(file, text, got[file]):
            diff = difflib.unified_diff(text.splitlines(), got[file].splitlines(), "golden", "now", lineterm="", n=1)
            pytest.fail(f"{name}/{file} changed:\n" + "\n".join(list(diff)[:30]))

"""report's answers (issue 57): index.html and the terminal lead with one short answer per question
the matrix asks, with its CI, its attested confounds, what a non-significant difference leaves open,
and a caveat when the target is a specbench fixture; the rest of the page folds below them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.main import app
from specbench.report.answers import fixture_caveat, is_fixture, summarise
from specbench.report.index import Provenance

ROOT = Path(__file__).resolve().parents[2]
BASELINES = ROOT / "results" / "baselines"


def _report(tmp_path: Path, name: str, *extra: str) -> tuple[str, str]:
    out = tmp_path / name
    res = CliRunner().invoke(app, ["report", str(BASELINES / name), "--out", str(out), "--no-plots", *extra])
    assert res.exit_code == 0, res.output
    return (out / "index.html").read_text(), res.output


def _answers_block(text: str) -> str:
    start = text.index('<section id="answers"')
    return text[start : text.index("</section>", start)]


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["cpu-default", "cpu-seed-questions"])
def test_the_page_leads_with_the_answers_and_the_fixture_caveat(tmp_path, name):
    text, _ = _report(tmp_path, name)
    block = _answers_block(text)
    first = min(i for i in (text.find("<table"), text.find("<img"), text.find("<dl")) if i >= 0)
    assert text.index('<section id="answers"') < first  # before any table, figure or provenance
    assert "fixture:heads-target is a tiny specbench test fixture" in block
    assert "<table" not in block and "<img" not in block
    # everything after the answers folds
    rest = text[text.index("</section>") :]
    assert re.findall(r"<h2>", rest) and all(
        "<summary><h2>" in rest[max(0, m.start() - 15) : m.start() + 4] for m in re.finditer(r"<h2>", rest)
    )


@pytest.mark.heavy
def test_mla_answer_names_its_confound_and_what_is_not_ruled_out(tmp_path):
    text, _ = _report(tmp_path, "cpu-default")
    block = _answers_block(text)
    mla = block[block.index("<h3>MLA</h3>") :]
    mla = mla[: mla.index("</div>")]
    assert "MLA off vs on: AL not significant in any of 3 settings" in mla
    assert "a difference up to 0.32 not ruled out" in mla  # the widest CI's far end, [-0.12, +0.32]
    assert "chunked_prefill on vs off, prefix_caching on vs off (attested by vLLM)" in mla
    assert "turns chunked prefill and prefix caching off whenever MLA is on" in mla
    norm = block[block.index("<h3>EAGLE output norm</h3>") :]
    assert "norm off vs on: AL lower in both settings, significant: -1.16 [-1.37, -0.96] (MLA on)" in norm
    assert block.index("<h3>EAGLE output norm</h3>") < block.index("<h3>MLA</h3>")  # the larger effect first


def _screen(tmp_path: Path, *extra: str) -> str:
    """report's terminal output at 120 columns, as a user's terminal gets it (a subprocess)."""
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "report", str(BASELINES / "cpu-default"), "--out", "r", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "120", "NO_COLOR": "1"},
    )
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


@pytest.mark.heavy
def test_the_default_runs_terminal_output_is_short(tmp_path):
    """At most 40 lines at 120 columns (72 before); the k advice once; where index.html is, not every path."""
    out = _screen(tmp_path)
    lines = out.splitlines()
    assert len(lines) <= 40, out
    assert sum("No k recommended" in x for x in lines) == 1
    assert any("also differs in chunked_prefill" in x for x in lines)  # MLA's confound, said
    wrote = [x for x in lines if x.startswith("wrote ")]
    assert wrote == ["wrote 17 files to r; open r/index.html (--verbose lists them)"]
    verbose = _screen(tmp_path, "--verbose")
    paths = verbose.split("\nwrote ", 1)[1]
    assert paths.index("index.html") < paths.index("summary.md")  # the page first among the paths
    assert len(verbose.splitlines()) > len(lines)


def test_summarise_words():
    assert summarise([(0.10, (-0.12, 0.32), "")], 2) == (
        "+0.10 [-0.12, +0.32], not significant: a difference up to 0.32 not ruled out"
    )
    assert summarise([(-1.2, (-1.4, -1.0), "")], 2).startswith("lower, -1.20 [-1.40, -1.00], significant")
    both = summarise([(-1.2, (-1.4, -1.0), "MLA on"), (-1.1, (-1.3, -0.9), "MLA off")], 2)
    assert both == "lower in both settings, significant: -1.20 [-1.40, -1.00] (MLA on); -1.10 [-1.30, -0.90] (MLA off)"
    assert (
        summarise([(0.2, None, "r0"), (0.3, None, "r1")], 2)
        == "no CI in either setting (too few units; Δ +0.20 to +0.30)"
    )
    mixed = summarise([(-1.2, (-1.4, -1.0), "a"), (0.1, (-0.5, 0.3), "b")], 2)
    assert (
        mixed
        == "significant in 1 of 2 settings: -1.20 [-1.40, -1.00] (a); elsewhere a difference up to 0.50 not ruled out"
    )


def test_fixture_caveat_reads_refs_and_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    assert is_fixture("fixture:target")
    assert is_fixture(str(tmp_path / "fixtures" / "heads-abc" / "target"))
    assert is_fixture("/home/u/.cache/specbench/fixtures/default-1/target")
    assert not is_fixture("deepseek-ai/DeepSeek-R1")
    assert fixture_caveat([Provenance([], "", "deepseek-ai/DeepSeek-R1")]) is None
    assert "fixture:target" in (fixture_caveat([Provenance([], "", "fixture:target")]) or "")

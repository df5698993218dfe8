"""What summary.md tells a reader about the report it sits in: the files it lists are the files
written, with and without figures (--no-plots), and its interval paragraph names the interval the
table holds. The default study (results/baselines/cpu-default) has studies, so divergence, speed-up
and k-prediction files are written too."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.analysis.intervals import cell_intervals
from specbench.cli.main import run_cli
from specbench.compare.sides import load_side

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "baselines" / "cpu-default"


def _listed(summary: str) -> set[str]:
    """The file names the "## Files" section names; "`x.png` / `.svg`" names x.png and x.svg."""
    section = summary.split("## Files", 1)[1]
    names: set[str] = set()
    for line in section.splitlines():
        last = ""
        for token in re.findall(r"`([^`]+)`", line):
            if token.startswith("."):  # "/ `.svg`": the stem of the name before it
                names.add(last.rsplit(".", 1)[0] + token)
            elif re.fullmatch(r"[\w.]+\.\w+", token):
                names.add(token)
                last = token
    return names


@pytest.mark.parametrize("plots", [pytest.param(True, marks=pytest.mark.slow), False], ids=["plots", "no-plots"])
def test_summary_lists_exactly_the_files_written(plots: bool, tmp_path: Path):
    out = tmp_path / "rep"
    assert run_cli(["report", str(RUN), "--out", str(out), "--plots" if plots else "--no-plots"]) == 0
    written = {p.name for p in out.iterdir()} - {"summary.md"}
    summary = (out / "summary.md").read_text()
    assert _listed(summary) == written
    figures = {n for n in written if n.endswith((".png", ".svg"))}
    if plots:  # the study's figures, each as PNG and SVG
        assert {"per_position.png", "al_over_time.svg", "divergence.png", "speedup.svg"} <= figures
    else:
        assert not figures and "--no-plots" in summary
        assert {"acceptance.csv", "divergence.csv", "speedup.csv", "kprediction.csv"} <= written


@pytest.mark.heavy
def test_summary_names_the_interval_of_its_table(tmp_path: Path):
    """The method a cell's interval states (Intervals.method) is the one summary.md describes."""
    out = tmp_path / "rep"
    assert run_cli(["report", str(RUN), "--out", str(out), "--no-plots"]) == 0
    summary = (out / "summary.md").read_text()
    (paragraph,) = [line for line in summary.splitlines() if line.startswith("**Intervals:**")]
    methods = {cell_intervals(c.units).method for c in load_side(RUN).cells.values() if len(c.units) > 1}
    assert len(methods) == 1 and f"`{next(iter(methods))}`" in paragraph
    assert "jackknife standard error" not in paragraph  # the interval before (jackknife-t)
    with (out / "acceptance.csv").open(newline="") as f:  # and the CSV names it on every row
        assert {row["ci_method"] for row in csv.DictReader(f)} == methods


@pytest.mark.heavy
def test_no_plots_never_loads_matplotlib(tmp_path: Path):
    """--no-plots is for CI jobs that read the tables: the report must not pay for matplotlib."""
    code = (
        "import sys\nfrom specbench.cli.main import run_cli\n"
        f"rc = run_cli(['report', {str(RUN)!r}, '--out', {str(tmp_path / 'rep')!r}, '--no-plots'])\n"
        "print(rc, 'matplotlib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.split()[-2:] == ["0", "False"], done.stderr[-2000:]

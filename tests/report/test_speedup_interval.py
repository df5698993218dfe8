"""`report --rerun-sd`: the speed-up interval's between-run spread is the user's to set (0: within
this run only), speedup.csv keeps both intervals, and the page says which one it shows."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from specbench.analysis.speedup import RERUN_SD
from specbench.cli.main import run_cli

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"


def _speedups(out: Path) -> list[dict[str, str]]:
    with open(out / "speedup.csv", newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["speedup_output_tok_per_s"]]


@pytest.mark.heavy
def test_rerun_sd_sets_the_width_and_the_page_says_so(tmp_path, capsys):
    assert run_cli(["report", str(RUN), "--out", str(tmp_path / "d"), "--no-plots"]) == 0
    assert run_cli(["report", str(RUN), "--out", str(tmp_path / "z"), "--no-plots", "--rerun-sd", "0"]) == 0
    capsys.readouterr()
    default, within = _speedups(tmp_path / "d"), _speedups(tmp_path / "z")
    assert len(default) == len(within) == 6
    for d, w in zip(default, within):
        lo, hi = float(w["speedup_output_tok_per_s_ci_low"]), float(w["speedup_output_tok_per_s_ci_high"])
        assert (lo, hi) == (
            float(d["speedup_output_tok_per_s_within_run_ci_low"]),
            float(d["speedup_output_tok_per_s_within_run_ci_high"]),
        )
        wide = float(d["speedup_output_tok_per_s_ci_high"]) / float(d["speedup_output_tok_per_s_ci_low"])
        assert math.log(wide) > math.log(hi / lo) + 2 * RERUN_SD  # widened by ±t x 0.33 at least
        assert float(d["rerun_sd_log"]) == RERUN_SD and float(w["rerun_sd_log"]) == 0
    page_d, page_z = (tmp_path / "d" / "summary.md").read_text(), (tmp_path / "z" / "summary.md").read_text()
    assert f"widened by a between-run SD of {RERUN_SD:g} on the log" in page_d
    assert "within this run only: a rerun may differ by more" in page_z

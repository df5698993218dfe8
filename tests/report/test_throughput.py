"""specbench/report/throughput.py: output tok/s between cells that differ in one axis, on the
committed default study. Ratios are checked against a hand sum over each cell's requests.jsonl;
the screen names the no-spec pair, and the report tables every pair."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from specbench.report.baseline_pairs import _read_run
from specbench.report.screen import final_screen
from specbench.report.throughput import headline, throughput_contrasts

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"


def _rate(cell: str) -> float:
    """Σ output tokens / Σ e2e over the cell's finished requests (>= 2 tokens), read by hand."""
    out = e2e = 0.0
    for line in (RUN / cell / "requests.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("error") or r.get("e2e_s") is None or r.get("ttft_s") is None or (r.get("output_tokens") or 0) < 2:
            continue
        out += r["output_tokens"]
        e2e += r["e2e_s"]
    return out / e2e


@pytest.fixture(scope="module")
def found():
    cells, _ = _read_run(RUN, False)
    return throughput_contrasts(cells, confidence=0.95, rerun_sd=0.33)


def test_every_one_axis_pair_of_like_cells_and_no_other(found):
    pairs = {(t.base, t.cand) for t in found}
    assert ("baseline__mla-on__r0", "baseline__mla-off__r0") in pairs  # MLA's own effect, no speculation
    assert ("mla-on__output_norm-on__r0", "mla-off__output_norm-on__r0") in pairs
    assert len(pairs) == 10  # 3 x 3 one-axis pairs among the 6 speculative cells, one among the 2 no-spec
    assert not any(t.base.startswith("baseline") != t.cand.startswith("baseline") for t in found)


def test_ratio_is_the_second_cells_rate_over_the_firsts(found):
    for t in found:
        assert t.point == pytest.approx(_rate(t.cand) / _rate(t.base), rel=1e-9), (t.base, t.cand)
        lo, hi = t.interval
        wlo, whi = t.within
        assert lo < wlo < t.point < whi < hi  # the between-run spread only widens
        assert t.significant() == (lo > 1 or hi < 1)


def test_screen_names_the_no_spec_pair_and_significant_ones_only(found):
    buf = io.StringIO()
    Console(file=buf, width=120, no_color=True).print(final_screen(RUN))
    text = buf.getvalue()
    no_spec = next(t for t in found if t.no_spec)
    assert f"- MLA off vs on (no spec): output tok/s {no_spec.point:.2f}×" in text
    shown = [ln for ln in text.splitlines() if "output tok/s" in ln and ln.startswith("- ")]
    assert len(shown) == len(headline(found)) == 1 + sum(t.significant() for t in found if not t.no_spec)
    # the tok/s column is the load's throughput, the number cells.csv and compare show
    tput = json.loads((RUN / "baseline__mla-on__r0" / "summary.json").read_text())
    value = tput["results_mean_output_throughput_token_per_s"]
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("no spec · MLA on"))
    assert f"{value:.1f}" in row and math.isfinite(value)

"""A ``speculative:FIELD`` axis changes only the draft (the planner gives it no baselines of its
own), so report pairs each of its cells with the one baseline at the cell's target and load values.
Cells carry their axes by label (``synthetic_acceptance_length``), which lost the ``speculative:``
prefix: before the fix every cell of results/baselines/cpu-calibration-speedup had "no matching
baseline" and no speed-up, in report and on the run's final screen."""

from __future__ import annotations

from specbench.report.baseline_pairs import run_speedups
from specbench.testing import BASELINES

RUN = BASELINES / "cpu-calibration-speedup"


def test_every_synthetic_length_cell_has_its_concurrencys_baseline():
    study = run_speedups(RUN)
    assert not study.unmatched, study.unmatched
    pairs = {s.cell: s.baseline for s in study.speedups}
    assert len(pairs) == 12
    for cell, base in pairs.items():
        conc = cell.split("__")[1]
        assert base == f"baseline__{conc}__r0", (cell, base)
    assert all(s.interleaved for s in study.speedups)

"""Speed-up pairs each speculative cell with the baseline serving the same target (no servers).

Real files: the committed default-study run (results/baselines/cpu-default) has one baseline per
MLA value (``baseline__mla-on__r0``, ``baseline__mla-off__r0``); each cell must be set against
its own. A run written before per-target baselines had a single ``baseline__r0`` with mla=on (and
no ``draft_axes`` in its resolved config); ``_single_baseline_copy`` gives the committed run that
layout. Its mla=off cells must get "no matching baseline", never a speed-up over the MLA-on
baseline (that would mix MLA with speculation).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from specbench.report.assemble import build_report, render_markdown, write_report
from specbench.report.baseline_pairs import analyse_run

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "baselines" / "cpu-default"
NORMS = ("on", "logits-only", "off")
ON = [f"mla-on__output_norm-{n}__r0" for n in NORMS]
OFF = [f"mla-off__output_norm-{n}__r0" for n in NORMS]


def _single_baseline_copy(dest: Path) -> Path:
    """The committed run as a pre-per-target-baseline run wrote it: one baseline, ``baseline__r0``, mla=on."""
    shutil.copytree(RUN, dest)
    shutil.rmtree(dest / "baseline__mla-off__r0")
    (dest / "baseline__mla-on__r0").rename(dest / "baseline__r0")
    cell = json.loads((dest / "baseline__r0" / "cell.json").read_text())
    assert cell["axes"] == {"mla": "on", "output_norm": "none"}
    (dest / "baseline__r0" / "cell.json").write_text(json.dumps({**cell, "cell_id": "baseline__r0"}))
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["cells"] = [c for c in manifest["cells"] if not c.startswith("baseline__")] + ["baseline__r0"]
    manifest["resolved_config"]["baseline"].pop("draft_axes", None)
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def _rate(cell_dir: Path) -> float:
    rows = [json.loads(x) for x in (cell_dir / "requests.jsonl").read_text().splitlines()]
    return sum(r["output_tokens"] for r in rows) / sum(r["e2e_s"] for r in rows)


@pytest.mark.slow
def test_old_single_baseline_run_leaves_mla_off_cells_unpaired(tmp_path):
    run = _single_baseline_copy(tmp_path / "old")
    study = analyse_run(run, n_resamples=200)
    assert {s.cell: s.baseline for s in study.speedups} == {c: "baseline__r0" for c in ON}
    assert [c for c, _ in study.unmatched] == OFF
    assert all("mla=off" in why and "baseline__r0 (mla=on)" in why for _, why in study.unmatched)
    # divergence of an mla=off cell against the mla=on baseline is marked as a mixed pair
    mixed = {(p.a, p.b): d for p, d in study.pairs if "baseline__r0" in (p.a, p.b)}
    assert mixed[(OFF[0], "baseline__r0")][-1].startswith("speculation + target (mla)")
    assert mixed[(ON[0], "baseline__r0")][-1] == "speculation"

    report = build_report([run], n_resamples=200)
    md = render_markdown(report)
    for c in ("MLA off · norm on", "MLA off · norm off"):  # tables name cells by their axis values
        assert f"| {c} | no matching baseline |" in md
    write_report(report, tmp_path / "rep")
    speed = pd.read_csv(tmp_path / "rep" / "speedup.csv").set_index("cell")
    assert set(speed.index) == set(ON + OFF)
    assert speed.loc[OFF, "speedup_output_tok_per_s"].isna().all()
    assert speed.loc[OFF, "notes"].str.startswith("no matching baseline").all()
    assert speed.loc[ON, "speedup_output_tok_per_s"].notna().all()


def test_a_baseline_per_mla_value_pairs_each_cell_with_its_own():
    study = analyse_run(RUN, n_resamples=200)
    assert not study.unmatched
    assert {s.cell: s.baseline for s in study.speedups} == {
        **{c: "baseline__mla-on__r0" for c in ON},
        **{c: "baseline__mla-off__r0" for c in OFF},
    }
    # the two baselines ran at different speeds, so a wrong pairing would show in the figures
    assert _rate(RUN / "baseline__mla-on__r0") != pytest.approx(_rate(RUN / "baseline__mla-off__r0"), rel=1e-3)
    new = {s.cell: s for s in study.speedups}
    for cells, base in ((ON, "baseline__mla-on__r0"), (OFF, "baseline__mla-off__r0")):
        for c in cells:
            assert new[c].point["output_tok_per_s"] == pytest.approx(_rate(RUN / c) / _rate(RUN / base))

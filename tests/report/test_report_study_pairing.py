"""Speed-up pairs each speculative cell with the baseline serving the same target (no servers).

Real files: the committed default-study run (results/baselines/cpu-default) has one baseline,
``baseline__r0`` with mla=on, from before per-target baselines. Its mla=off cells must get "no
matching baseline", never a speed-up over the MLA-on baseline (that would mix MLA with
speculation). A copy with a second baseline cell labelled mla=off must pair them with it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from specbench.report.build import build_report, render_markdown, write_report
from specbench.report.study import analyse_run

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "baselines" / "cpu-default"
ON = ["mla-on__output_norm-on__r0", "mla-on__output_norm-off__r0"]
OFF = ["mla-off__output_norm-on__r0", "mla-off__output_norm-off__r0"]


def test_old_single_baseline_run_leaves_mla_off_cells_unpaired(tmp_path):
    study = analyse_run(RUN, n_resamples=200)
    assert {s.cell: s.baseline for s in study.speedups} == {c: "baseline__r0" for c in ON}
    assert [c for c, _ in study.unmatched] == OFF
    assert all("mla=off" in why and "baseline__r0 (mla=on)" in why for _, why in study.unmatched)
    # divergence of an mla=off cell against the mla=on baseline is marked as a mixed pair
    mixed = {(p.a, p.b): d for p, d in study.pairs if "baseline__r0" in (p.a, p.b)}
    assert mixed[(OFF[0], "baseline__r0")][-1].startswith("speculation + target (mla)")
    assert mixed[(ON[0], "baseline__r0")][-1] == "speculation"

    report = build_report([RUN], n_resamples=200)
    md = render_markdown(report)
    for c in ("MLA off · norm on", "MLA off · norm off"):  # tables name cells by their axis values
        assert f"| {c} | no matching baseline |" in md
    write_report(report, tmp_path)
    speed = pd.read_csv(tmp_path / "speedup.csv").set_index("cell")
    assert set(speed.index) == set(ON + OFF)
    assert speed.loc[OFF, "speedup_output_tok_per_s"].isna().all()
    assert speed.loc[OFF, "notes"].str.startswith("no matching baseline").all()
    assert speed.loc[ON, "speedup_output_tok_per_s"].notna().all()


def test_a_baseline_per_mla_value_pairs_each_cell_with_its_own(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    src, dst = run / "baseline__r0", run / "baseline__mla-off__r0"
    shutil.copytree(src, dst)
    cell = json.loads((dst / "cell.json").read_text())
    cell.update(cell_id=dst.name, axes={"mla": "off", "output_norm": "none"})
    (dst / "cell.json").write_text(json.dumps(cell))
    # make the copy's timings distinguishable: twice as slow, so speed-ups over it double
    rows = [json.loads(x) for x in (dst / "requests.jsonl").read_text().splitlines()]
    rows = [{**r, "e2e_s": 2 * r["e2e_s"], "ttft_s": 2 * r["ttft_s"]} for r in rows]
    (dst / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["cells"].append(dst.name)
    (run / "manifest.json").write_text(json.dumps(manifest))

    study = analyse_run(run, n_resamples=200)
    assert not study.unmatched
    assert {s.cell: s.baseline for s in study.speedups} == {**{c: "baseline__r0" for c in ON},
                                                              **{c: "baseline__mla-off__r0" for c in OFF}}
    old = {s.cell: s for s in analyse_run(RUN, n_resamples=200).speedups}
    new = {s.cell: s for s in study.speedups}
    assert new[ON[0]].point["tpot"] == pytest.approx(old[ON[0]].point["tpot"])
    base_rows = [json.loads(x) for x in (RUN / "baseline__r0" / "requests.jsonl").read_text().splitlines()]
    off_rows = [json.loads(x) for x in (RUN / OFF[0] / "requests.jsonl").read_text().splitlines()]
    rate = lambda rs: sum(r["output_tokens"] for r in rs) / sum(r["e2e_s"] for r in rs)  # noqa: E731
    assert new[OFF[0]].point["output_tok_per_s"] == pytest.approx(2 * rate(off_rows) / rate(base_rows))

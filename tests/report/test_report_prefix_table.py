"""The report never prints prefix AL beside plain AL as the same quantity (committed run, no server).

Prefix AL covers the early output only (specbench/analysis/divergence.py), so it has a table of its
own; the divergence table keeps plain AL. Checked on the committed default study, whose cells
diverge, so the two figures differ there.
"""

from __future__ import annotations

from pathlib import Path

from specbench.report.baseline_pairs import analyse_run
from specbench.report.pair_sections import divergence_rows, prefix_rows, render_sections

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"


def _md(header, rows):
    return "\n".join(["| " + " | ".join(header) + " |"] + ["| " + " | ".join(r) + " |" for r in rows])


def test_prefix_al_has_a_table_of_its_own():
    study = analyse_run(RUN, n_resamples=200)
    head_div, rows_div = divergence_rows(study)
    head_pre, rows_pre = prefix_rows(study)
    assert "AL A" in head_div and not any("prefix" in h.lower() for h in head_div)
    assert all(h in ("cell A", "cell B", "prompts") or "prefix AL" in h for h in head_pre)
    assert len(rows_div) == len(rows_pre) == len(study.pairs) > 0
    # the figures differ where outputs diverge: printing them side by side would invite a comparison
    (p, _), cp = study.pairs[0], study.common_prefix[0]
    assert p.identical < p.n and rows_pre[0][3].startswith(f"{cp.al_a:.2f}")
    md = "\n".join(render_sections([study], _md))
    assert md.index("## Output divergence") < md.index("## Acceptance on the shared prefix (prefix AL; not an AL)")

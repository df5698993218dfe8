"""The faceted per-position plot, drawn from a committed real run (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.cli import plot_facets
from specbench.render.plots import facets

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results/baselines/cpu-head-variants"


@pytest.mark.heavy
def test_one_panel_per_value_one_line_per_cell_with_its_ci(tmp_path):
    rows = facets.read_cells(RUN)
    fig = facets.facet_figure(rows, "output_norm", "output_norm", "SPECBENCH_POS0_MASK")
    axes = fig.get_axes()
    assert [a.get_title() for a in axes] == [f"output_norm = {v}" for v in ("on", "logits-only", "off")]
    for ax in axes:
        value = ax.get_title().split(" = ")[1]
        mine = {r["SPECBENCH_POS0_MASK"]: r for r in rows if r["output_norm"] == value}
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(labels) == 2 and all(
            f"AL {float(r['mean_acceptance_length']):.2f}" in " ".join(labels) for r in mine.values()
        )
        lines = [ln for ln in ax.get_lines() if ln.get_linestyle() in ("-", "--")]
        ys = sorted(tuple(round(y, 6) for y in ln.get_ydata()) for ln in lines)
        assert ys == sorted(tuple(round(float(r[f"p{i}"]), 6) for i in range(3)) for r in mine.values())
    facets.save(fig, tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_names_a_missing_column(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        plot_facets.main(
            [
                str(RUN),
                str(tmp_path / "x.png"),
                "--panel",
                "method",
                "--color",
                "output_norm",
                "--style",
                "SPECBENCH_POS0_MASK",
            ]
        )
    assert exc.value.code == 2 and "no column 'method'" in capsys.readouterr().err

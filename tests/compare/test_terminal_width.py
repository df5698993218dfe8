"""``compare --verbose`` at a 100-column terminal: every table fits, no figure is clipped, and the
figures it shows read back as the compared values (the README's recipe: two committed gate runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from specbench.compare import DEFAULT_GATES, compare_sides, load_side, parse_gate, text

BASELINES = Path(__file__).resolve().parents[2] / "results" / "baselines"
COLUMNS = 100


@pytest.fixture(scope="module")
def comp():
    base, cand = (load_side(BASELINES / name) for name in ("cpu-gate", "cpu-gate-rerun"))
    return compare_sides(base, cand, [parse_gate(g) for g in DEFAULT_GATES], default_gates=True)


def _tables(comp) -> str:
    console = Console(width=COLUMNS, record=True, force_terminal=True, color_system=None)
    text._print_details(comp, console)
    text._print_verdicts(comp, console)
    return console.export_text()


def test_every_table_fits_100_columns_unclipped(comp) -> None:
    out = _tables(comp)
    wide = [line for line in out.splitlines() if len(line.rstrip()) > COLUMNS]
    assert not wide, wide
    assert "…" not in out  # Rich's mark of a clipped cell


def test_the_figures_shown_are_the_compared_values(comp) -> None:
    """Each detail row's base and cand, as printed (four significant digits), within rounding of the
    values compare decided on; its CI's ends likewise."""
    lines = _tables(comp).splitlines()
    titles = text.cell_titles(comp)
    checked = 0
    for cell in comp.cells:
        start = next(i for i, line in enumerate(lines) if line.startswith(titles[cell.name] + "  ("))
        for row in cell.rows:
            name = text.short_metric(row.name)
            line = next(line for line in lines[start:] if line.startswith(name + " "))
            fields = line[len(name) :].split()
            base, cand = (float(f) for f in fields[:2])
            for shown, value in ((base, row.base), (cand, row.cand)):
                assert shown == pytest.approx(value, rel=6e-4, abs=6e-5), (cell.name, row.name, line)
            ends = re.search(r"\[([-+0-9.]+)(pp)?, ([-+0-9.]+)(pp)?\]", line)
            assert ends and row.ci is not None, line
            unit = 100 if row.metric.is_fraction else 1
            for shown, value in ((ends[1], row.ci[0]), (ends[3], row.ci[1])):
                assert float(shown) == pytest.approx(value * unit, rel=6e-3, abs=6e-3), (cell.name, row.name, line)
            checked += 1
    assert checked >= 40  # 4 cells x 12 rows


def test_each_mark_is_explained_once(comp) -> None:
    out = " ".join(_tables(comp).split())  # the key wraps at the width
    assert "†" in out and out.count("† CI within one run") == 1 and out.count("~ not shown") == 1

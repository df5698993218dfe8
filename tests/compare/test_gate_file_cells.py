"""A gate file's ``cells:`` filter holds axis values (scalars, as a cell's axes do) or lists of
them; anything else is refused where the file is read, in one line naming the file and the field
(load_gate_file's message: test_gates.py's test_gate_file_errors_name_file_and_item; here what
`specbench compare` makes of it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from realruns import BASELINE, run
from test_gates import CELLS, NOT_AXIS_VALUES

from specbench.compare.gates import load_gate_file


def _gate_file(tmp_path: Path, cells: str) -> Path:
    f = tmp_path / "gates.yaml"
    f.write_text(f"{CELLS}{cells}\n")
    return f


@pytest.mark.parametrize(("cells", "shown"), NOT_AXIS_VALUES)
def test_a_value_that_is_not_a_scalar_is_exit_2_naming_file_and_field(tmp_path: Path, cells: str, shown: str) -> None:
    f = _gate_file(tmp_path, cells)
    code, out = run(BASELINE, BASELINE, "--gate-file", f)
    assert code == 2
    assert f"error: {f}: gates.0.cells.mla: {shown} is not an axis value" in " ".join(out.split())


def test_scalars_and_lists_of_them_select_as_the_cells_axes_show_them(tmp_path: Path) -> None:
    f = _gate_file(tmp_path, "{mla: [on, off], output_norm: logits-only, 'load:concurrency': 4, x: 0.5}")
    (gate,) = load_gate_file(f)
    assert gate.cells == (
        ("load:concurrency", ("4",)),
        ("mla", ("on", "off")),
        ("output_norm", ("logits-only",)),
        ("x", ("0.5",)),
    )
    assert gate.selects({"mla": "off", "output_norm": "logits-only", "load:concurrency": 4, "x": 0.5})
    assert not gate.selects({"mla": "off", "output_norm": "on", "load:concurrency": 4, "x": 0.5})
    assert not gate.selects({"mla": "off", "output_norm": "logits-only", "load:concurrency": 8, "x": 0.5})

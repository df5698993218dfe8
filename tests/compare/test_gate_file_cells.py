"""A gate file's ``cells:`` filter holds axis values (scalars, as a cell's axes do) or lists of
them; anything else is refused where the file is read, in one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from realruns import BASELINE, run

from specbench.compare.gates import GateError, load_gate_file


def _gate_file(tmp_path: Path, cells: str) -> Path:
    f = tmp_path / "gates.yaml"
    f.write_text(f'gates:\n  - gate: "acceptance_length:-5%"\n    cells: {cells}\n')
    return f


@pytest.mark.parametrize(("cells", "shown"), [("{mla: {a: 1}}", "{'a': 1}"), ("{mla: [on, [x]]}", "['x']")])
def test_a_value_that_is_not_a_scalar_is_refused_naming_file_and_field(tmp_path: Path, cells: str, shown: str) -> None:
    f = _gate_file(tmp_path, cells)
    with pytest.raises(GateError) as err:
        load_gate_file(f)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{f}: gates.0.cells.mla: {shown} is not an axis value: ")
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

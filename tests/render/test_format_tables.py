"""specbench/render/format.py and tables.py: one missing glyph, intervals, cell titles by axis value."""

from __future__ import annotations

import math

from specbench.render import format as fmt
from specbench.render.tables import cell_title, column_chunks, titles


def test_one_missing_glyph_for_none_and_nan():
    assert (
        fmt.num(None)
        == fmt.num(math.nan)
        == fmt.pp(None)
        == fmt.short(None)
        == fmt.with_ci(None, (1, 2))
        == fmt.MISSING
    )
    assert fmt.num(-0.5, 2, sign=True) == "-0.50" and fmt.num(0.5, 2, sign=True) == "+0.50"
    assert fmt.pp(0.0125) == "+1.25pp" and fmt.times(1.234) == "1.23×"


def test_interval_beside_its_value_or_a_note_when_there_is_none():
    assert fmt.with_ci(2.5, (2.0, 3.0), 2) == "2.50 [2.00, 3.00]"
    assert fmt.with_ci(-0.1, (-0.2, 0.0), 2, sign=True) == "-0.10 [-0.20, +0.00]"
    assert fmt.with_ci(2.5, (math.nan, 3.0), 2, no_ci="(no CI)") == "2.50 (no CI)"
    assert fmt.with_ci(2.5, None, 2) == "2.50"


def test_titles_show_the_axis_values_that_vary():
    cells = [
        ("mla-on__output_norm-on__r0", {"mla": "on", "output_norm": "on"}, False, 0),
        ("mla-on__output_norm-off__r0", {"mla": "on", "output_norm": "off"}, False, 0),
        ("baseline__mla-on__r0", {"mla": "on", "output_norm": "none"}, True, 0),
    ]
    # mla takes one value: left out of the speculative cells' titles; the baseline says what it is
    assert titles(cells) == {
        "mla-on__output_norm-on__r0": "norm on",
        "mla-on__output_norm-off__r0": "norm off",
        "baseline__mla-on__r0": "no spec",
    }
    both = cells + [("mla-off__output_norm-on__r0", {"mla": "off", "output_norm": "on"}, False, 0)]
    assert titles(both)["mla-off__output_norm-on__r0"] == "MLA off · norm on"
    assert titles(both)["baseline__mla-on__r0"] == "no spec · MLA on"  # never "output_norm=none"


def test_repeat_shown_only_when_there_are_several():
    one = [("a__r0", {"k": "2"}, False, 0), ("b__r0", {"k": "3"}, False, 0)]
    two = one + [("a__r1", {"k": "2"}, False, 1)]
    assert titles(one)["a__r0"] == "k 2"
    assert titles(two)["a__r1"] == "k 2 · r1"


def test_ambiguous_titles_fall_back_to_ids():
    cells = [("x", {"mla": "on"}, False, None), ("y", {"mla": "on"}, False, None)]
    assert titles(cells) == {"x": "x", "y": "y"}
    assert cell_title({}, fallback="id") == "id"


def test_columns_split_into_tables_that_fit():
    assert [list(c) for c in column_chunks([20] * 4, 6, 80)] == [[0, 1, 2], [3]]
    assert [list(c) for c in column_chunks([20] * 4, 6, 200)] == [[0, 1, 2, 3]]
    assert [list(c) for c in column_chunks([300], 6, 80)] == [[0]]  # one too-wide column still shown


def test_specbench_env_axes_read_as_words():
    from specbench.render.tables import axis_name

    assert axis_name("SPECBENCH_POS0_MASK") == "pos0 mask" and axis_name("VLLM_X") == "VLLM_X"

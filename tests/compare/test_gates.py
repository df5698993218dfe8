"""Gate expressions, gate files and the gate decision rule (specbench/compare/gates.py)."""

from __future__ import annotations

import pytest

from specbench.compare.gates import GRAMMAR, GateError, decide, load_gate_file, parse_gate
from specbench.compare.registry import METRICS


@pytest.mark.parametrize(
    "expr, metric, index, value, unit",
    [
        ("acceptance_length:-3%", "mean_acceptance_length", None, -3.0, "%"),
        ("mean_acceptance_length:-0.1", "mean_acceptance_length", None, -0.1, "abs"),
        ("p_0:-2pp", "per_position", 0, -2.0, "pp"),
        ("AL:-5%", "mean_acceptance_length", None, -5.0, "%"),
        ("α_1:-5pp", "conditional", 1, -5.0, "pp"),
        ("per_position[*]:-2pp", "per_position", -1, -2.0, "pp"),
        ("ttft_p50_ms:+10%", "ttft_p50_ms", None, 10.0, "%"),
        ("draft_acceptance_rate:-1pp", "draft_acceptance_rate", None, -1.0, "pp"),
        ("DAR:-1pp", "draft_acceptance_rate", None, -1.0, "pp"),
        ("per_position[2]:0", "per_position", 2, 0.0, "abs"),
        (" acceptance_length : -3% ", "mean_acceptance_length", None, -3.0, "%"),
    ],
)
def test_parse_valid(expr, metric, index, value, unit):
    g = parse_gate(expr)
    assert (g.metric.name, g.index, g.value, g.unit) == (metric, index, value, unit)


@pytest.mark.parametrize(
    "expr, fragment",
    [
        ("acceptance_length", "not of the form"),
        ("acceptance_length:-3x", "not of the form"),
        ("latency:-3%", "unknown metric 'latency'"),
        ("per_position:-2pp", "needs a position"),
        ("acceptance_length[0]:-3%", "has no positions"),
        ("acceptance_length:+3%", "must be written -3%"),
        ("ttft_p50_ms:-10%", "must be written +10%"),
        ("acceptance_length:-2pp", "only applies to fractions"),
        ("per_position[a]:-2pp", "not of the form"),
        ("per_position[*]:-5", "needs a unit: -5pp (percentage points) or -5%"),
        ("p_0:-0.02", "-0.02pp (percentage points; 0.02 as a fraction is 2pp) or -0.02%"),
    ],
)
def test_parse_malformed_names_expression_and_grammar(expr, fragment):
    with pytest.raises(GateError) as exc:
        parse_gate(expr)
    msg = str(exc.value)
    assert repr(expr) in msg and fragment in msg and GRAMMAR in msg
    assert "\n" not in msg


def test_tolerance_units():
    assert parse_gate("per_position[0]:-2pp").tolerance(0.7) == pytest.approx(0.02)
    assert parse_gate("acceptance_length:-3%").tolerance(2.5) == pytest.approx(0.075)
    assert parse_gate("per_position[0]:-5%").tolerance(0.7) == pytest.approx(0.035)


def test_aliases_are_shown_in_the_canonical_form():
    assert parse_gate("AL:-5%").expr == "acceptance_length:-5%"
    assert parse_gate("p0:-2pp").expr == "per_position[0]:-2pp" and parse_gate("alpha_2:-1pp").row == "conditional[2]"


def test_every_short_name_a_table_shows_is_a_gate_name():
    """docs/gate.md: the tables' short names work as gates too (compare/text.py's SHORT)."""
    from specbench.compare.text import SHORT

    for name, short in SHORT.items():
        assert parse_gate(f"{short}:{'+' if not METRICS[name].higher_is_better else '-'}5%").metric.name == name


def test_decide_rule():
    al = parse_gate("acceptance_length:-0.1")  # higher is better: harm = base - cand
    # whole CI of the change past -0.1: fail
    assert decide(al, 2.5, 2.2, (-0.4, -0.2)).status == "fail"
    # the CI straddles the tolerance: neither known within it nor past it
    d = decide(al, 2.5, 2.35, (-0.3, -0.05))
    assert d.status == "inconclusive" and d.undecided and d.tested
    # significant but within tolerance: pass
    assert decide(al, 2.5, 2.45, (-0.08, -0.02)).status == "pass"
    # no CI: no verdict from a point estimate; says how to get units
    d = decide(al, 2.5, 2.3, None, why="too few units")
    assert d.status == "inconclusive" and "no verdict from a point estimate" in d.message and "repeats" in d.message
    assert decide(al, None, 2.3, None).status == "inconclusive"
    ttft = parse_gate("ttft_p50_ms:+10%")  # lower is better: harm = cand - base; tolerance 10% of 100 = 10
    assert decide(ttft, 100.0, 130.0, (15.0, 45.0)).status == "fail"
    assert decide(ttft, 100.0, 130.0, (5.0, 45.0)).status == "inconclusive"
    assert decide(ttft, 100.0, 105.0, (1.0, 9.0)).status == "pass"
    assert decide(ttft, 100.0, 70.0, (-45.0, -15.0)).status == "pass"  # faster is never a failure


def test_every_metric_has_direction_and_unit():
    for m in METRICS.values():
        assert m.unit in ("tokens", "fraction", "ms", "tok/s", "x")
        assert isinstance(m.higher_is_better, bool)
    assert METRICS["mean_acceptance_length"].higher_is_better and not METRICS["ttft_p50_ms"].higher_is_better


def test_gate_file(tmp_path):
    f = tmp_path / "gates.yaml"
    f.write_text("gates:\n  - acceptance_length:-3%\n  - gate: per_position[0]:-1pp\n    cells: {output_norm: on}\n")
    gates = load_gate_file(f)
    assert [g.expr for g in gates] == ["acceptance_length:-3%", "per_position[0]:-1pp"]
    # YAML reads bare `on` as True; the selector still matches the stored axis value "on"
    assert gates[1].selects({"output_norm": "on", "mla": "off"}) and not gates[1].selects({"output_norm": "off"})
    f.write_text("- per_position[*]:-2pp\n")
    assert load_gate_file(f)[0].all_positions


CELLS = 'gates:\n  - gate: "acceptance_length:-5%"\n    cells: '  # a gate file up to its cells: filter
# A cells: filter holds axis values (scalars, as a cell's axes do) or lists of them; a mapping or a
# nested list is refused where the file is read (tests/compare/test_gate_file_cells.py: the CLI too).
NOT_AXIS_VALUES = [("{mla: {a: 1}}", "{'a': 1}"), ("{mla: [on, [x]]}", "['x']")]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("gates:\n  - acceptance_length:+3%\n", "gates[0]"),
        ("gates:\n  - gate: per_position[0]:-1pp\n    cell: {a: b}\n", "gates.0.cell: Extra inputs are not permitted"),
        ("gatez: []\n", "gates: Field required; gatez: Extra inputs are not permitted"),
        ("gates: []\n", "no gates"),
        ("gates: [\n", "not readable YAML"),
        *[
            (f"{CELLS}{cells}\n", f"gates.0.cells.mla: {shown} is not an axis value: ")
            for cells, shown in NOT_AXIS_VALUES
        ],
    ],
)
def test_gate_file_errors_name_file_and_item(tmp_path, text, fragment):
    """One line: the file, then the item and what is wrong with it."""
    f = tmp_path / "gates.yaml"
    f.write_text(text)
    with pytest.raises(GateError) as exc:
        load_gate_file(f)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{f}: {fragment}"), msg

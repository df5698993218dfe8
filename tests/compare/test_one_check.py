"""A verdict is one value (issue 58): a check has one type, ``GateResult``, from ``decide`` to its
verdict, never copied field by field into another; the steps after ``decide`` are the ordered
tuples of compare/gate_checks.py (``IN_CELL``, then ``OVER_COMPARE``), applied in that order, the
order docs/contracts.md gives."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from specbench.compare import compare_sides, gate_checks, load_side, parse_gate
from specbench.compare.gates import decide
from specbench.compare.verdicts import GateResult
from specbench.testing.simruns import P

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specbench"
FIELDS = {f.name for f in dataclasses.fields(GateResult)}


def _copies(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """Calls that pass three or more keywords ``f=X.f`` read from one object X: a field-by-field copy."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        by: dict[str, list[str]] = {}
        for kw in node.keywords:
            v = kw.value
            if kw.arg in FIELDS and isinstance(v, ast.Attribute) and v.attr == kw.arg:
                by.setdefault(ast.dump(v.value), []).append(kw.arg)
        out += [(node.lineno, names) for names in by.values() if len(names) >= 3]
    return out


def _check_calls(tree: ast.AST) -> ast.AST:
    """Only the calls that make a check: ``GateResult(...)`` and ``replace(...)``."""
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", "")) in ("GateResult", "replace")
    ]
    return ast.Module(body=[ast.Expr(c) for c in calls], type_ignores=[])


def test_no_module_copies_a_check_field_by_field():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = _check_calls(ast.parse(path.read_text(encoding="utf-8")))
        for line, names in _copies(tree):
            found[f"{path.relative_to(ROOT).as_posix()}:{line}"] = names
    assert not found, f"a check is one GateResult, carried through the steps with replace(): {found}"


def test_the_copy_finder_sees_a_copy():
    old = "GateResult(cell=c, gate=g, metric=m, status=d.status, message=d.message, p_value=d.p_value)"
    assert _copies(_check_calls(ast.parse(old))) == [(1, ["status", "message", "p_value"])]


def test_a_check_has_one_type():
    """No other dataclass of the compare holds most of a check's fields (the old ``Decision``
    held 13 of them and was copied into a GateResult field by field)."""
    twins = {}
    for path in sorted((PACKAGE / "compare").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name != "GateResult":
                names = {
                    s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                if names and len(names & FIELDS) * 2 > len(names):
                    twins[f"{path.name}:{node.name}"] = sorted(names & FIELDS)
    assert not twins, twins


def test_decide_returns_the_check():
    gate = parse_gate("acceptance_length:-3%")
    check = decide(gate, 2.5, 2.2, (-0.4, -0.2), cell="c")
    assert isinstance(check, GateResult) and (check.cell, check.gate, check.metric) == (
        "c",
        "acceptance_length:-3%",
        "mean_acceptance_length",
    )
    assert check.status == "fail" and check.tested and check.control == "per check"


def _step_names(steps) -> list[str]:
    return [
        f.__name__ if f.__module__ == gate_checks.__name__ else f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}"
        for f in steps
    ]


def _listed(section: str, name: str) -> list[str]:
    """The steps docs/contracts.md lists after ``name``: ``a`` (why) -> ``b`` -> ... up to ``;`` or the sentence's end."""
    text = section.split(f"`{name}`:", 1)[1]
    while re.search(r"\([^()]*\)", text):  # the asides, innermost first
        text = re.sub(r"\([^()]*\)", "", text)
    chain = re.split(r";|(?<=`)\s*\.\s", text, maxsplit=1)[0]
    return [re.fullmatch(r"\s*`([\w.]+)`\s*", part).group(1) for part in chain.split("->")]


def test_contracts_md_gives_the_steps_in_their_order():
    text = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    section = text.split("## Compare", 1)[1].split("\n## ", 1)[0]
    assert _listed(section, "IN_CELL") == _step_names(gate_checks.IN_CELL)
    assert _listed(section, "OVER_COMPARE") == _step_names(gate_checks.OVER_COMPARE)


def test_the_steps_are_applied_in_their_order(make_run, monkeypatch):
    """Every check of a cell goes through IN_CELL in order, one check after another (not each step
    over every check), then the compare through OVER_COMPARE."""
    seen: list[tuple[str, str | None]] = []  # (step, the check's gate: None for a step over the compare)
    in_cell = [s.__name__ for s in gate_checks.IN_CELL]
    over_compare = [s.__name__ for s in gate_checks.OVER_COMPARE]

    def recorded(step, of_check: bool):
        def wrapper(*args):
            seen.append((step.__name__, args[0].gate if of_check else None))
            return step(*args)

        return wrapper

    monkeypatch.setattr(gate_checks, "IN_CELL", tuple(recorded(s, True) for s in gate_checks.IN_CELL))
    monkeypatch.setattr(gate_checks, "OVER_COMPARE", tuple(recorded(s, False) for s in gate_checks.OVER_COMPARE))
    cells = [{"axes": {"mla": "on", "output_norm": "off"}, "p": P, "units": 40, "drafts": 25}]
    base, cand = make_run("base", cells, seed=1), make_run("cand", cells, seed=2)
    gates = [parse_gate("acceptance_length:-3%"), parse_gate("draft_acceptance_rate:-2pp")]
    comp = compare_sides(load_side(base), load_side(cand), gates)
    checks = [g.gate for c in comp.cells for g in c.gates]
    assert len(in_cell) > 1 and len(checks) == 2 and len(set(checks)) == 2  # two checks tell the two orders apart
    assert seen == [(step, g) for g in checks for step in in_cell] + [(step, None) for step in over_compare]


@pytest.mark.parametrize("field", ["status", "message"])
def test_a_step_returns_a_new_check(field):
    g = GateResult(cell="c", gate="g", metric="m", status="pass", message="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(g, field, "x")

"""Exit codes are decided in cli/ only (issue 58; tests/test_exit_codes.py: no core module names
one): the core returns outcomes (a compare's verdict, how a run ended), specbench/cli/exits.py maps
them with one table, OUTCOMES, whose every code is a row of errors.EXIT_CODES for its command, and
docs/contracts.md's table is that table."""

from __future__ import annotations

import re
from pathlib import Path

from specbench import errors
from specbench.cli.exits import OUTCOMES, compare_exit, run_exit
from specbench.compare.verdicts import Comparison, GateResult, Status

ROOT = Path(__file__).resolve().parents[2]


def test_every_outcome_code_is_a_row_of_the_table_for_its_command():
    rows = {(code, command) for _, code, command, _ in errors.EXIT_CODES}
    for (command, outcome), code in OUTCOMES.items():
        assert (code, command) in rows or (code, None) in rows, (command, outcome, code)
    # each command's outcomes name its own codes: a run never ends with the regression code
    assert errors.EXIT_REGRESSION not in {c for (cmd, _), c in OUTCOMES.items() if cmd != "compare"}


def test_contracts_md_table_is_outcomes():
    text = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    section = text.split("## Compare", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+?) \| (\d+) \|$", section, flags=re.M)
    assert {(cmd, outcome): int(code) for cmd, outcome, code in rows} == OUTCOMES
    assert len(rows) == len(OUTCOMES)


def _comp(*statuses: Status, allow: bool = False) -> Comparison:
    comp = Comparison("b", "c", [], [], [], [], [], [], False, 0.95, 0, allow_inconclusive=allow)
    comp.unmatched = [GateResult(cell="c", gate="g", metric="m", status=s, message="m") for s in statuses]
    return comp


def test_compare_outcomes_and_their_codes():
    assert compare_exit(_comp(Status.PASS)) == errors.EXIT_OK
    assert compare_exit(_comp(Status.PASS, Status.FAIL, Status.INCONCLUSIVE)) == errors.EXIT_REGRESSION
    assert compare_exit(_comp(Status.PASS, Status.INCONCLUSIVE)) == errors.EXIT_INCONCLUSIVE
    assert compare_exit(_comp(Status.INCONCLUSIVE, allow=True)) == errors.EXIT_OK
    assert compare_exit(_comp(Status.FAIL, allow=True)) == errors.EXIT_REGRESSION  # allowed: the undecided only
    assert _comp(Status.INCONCLUSIVE, allow=True).verdict == Status.INCONCLUSIVE  # the verdict stays what it is


def test_run_outcomes_and_their_codes():
    assert run_exit("done") == errors.EXIT_OK
    assert run_exit("some_failed") == errors.EXIT_FAILED_CELLS

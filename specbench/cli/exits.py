"""The one place a command's outcome becomes its exit code.

The core returns outcomes, never codes: a compare its verdict (``Comparison.verdict``: pass, fail
or inconclusive), a run how it ended (``run.runner.execute``: the manifest's status, ``done`` or
``some_failed``). :data:`OUTCOMES` maps each to a code of specbench/errors.py's table
(``EXIT_CODES``, README's "Exit codes"); docs/contracts.md's table of it is tested against it
(tests/cli/test_exits.py). The compare core is not imported here: the CLI starts without numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specbench.errors import EXIT_FAILED_CELLS, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION

if TYPE_CHECKING:
    from specbench.compare.verdicts import Comparison

# (command, outcome) -> exit code. Each code means one thing per command (errors.EXIT_CODES).
OUTCOMES: dict[tuple[str, str], int] = {
    ("compare", "pass"): EXIT_OK,
    ("compare", "fail"): EXIT_REGRESSION,
    ("compare", "inconclusive"): EXIT_INCONCLUSIVE,
    ("compare", "inconclusive, --allow-inconclusive"): EXIT_OK,
    ("run", "done"): EXIT_OK,
    ("run", "some_failed"): EXIT_FAILED_CELLS,
}


def compare_exit(comp: Comparison) -> int:
    """A compare's exit code: 1 a check failed; 3 none failed but some could not be decided (0 under
    ``--allow-inconclusive``, which ``comp`` carries); 0 every check passed."""
    outcome = comp.verdict.value
    if outcome == "inconclusive" and comp.allow_inconclusive:
        outcome = "inconclusive, --allow-inconclusive"
    return OUTCOMES["compare", outcome]


def run_exit(status: str) -> int:
    """A run's exit code from how it ended (``execute``'s return, the manifest's status)."""
    return OUTCOMES["run", status]

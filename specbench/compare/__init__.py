"""Compare two runs (or log / /metrics files) and gate regressions: ``specbench compare``.

:func:`load_side` reads a side, :func:`compare_sides` computes rows, verdicts and gate results,
:mod:`.render` / :mod:`.junit` / :mod:`specbench.render.plots.position_deltas` turn a :class:`Comparison` into output.
"""

from specbench.compare.cellwise import CellComparison, Comparison, GateResult, MetricRow, compare_sides
from specbench.compare.gates import DEFAULT_GATES, GRAMMAR, Gate, GateError, decide, load_gate_file, parse_gate
from specbench.compare.sides import Side, SideCell, load_side

__all__ = [
    "DEFAULT_GATES",
    "GRAMMAR",
    "CellComparison",
    "Comparison",
    "Gate",
    "GateError",
    "GateResult",
    "MetricRow",
    "Side",
    "SideCell",
    "compare_sides",
    "decide",
    "load_gate_file",
    "load_side",
    "parse_gate",
]

"""Evidence sized to the gate: how many distinct prompts a cell must send for its gated checks to
be able to fail (``specbench run --gate EXPR --gate-baseline RUN``).

A gate check passes only when its interval's upper end of harm is within its tolerance T, and fails
only when its lower end is past T after Holm (:mod:`specbench.compare.power`). A size serves both
ends when, with SE the standard error of the change and m the checks Holm holds together,

- no change passes with >= 80% probability: ``(z_(1-alpha) + z_0.8) x SE <= T``, and
- a lone true harm of 2T fails with >= 80% probability: ``(z_(1-alpha/m) + z_0.8) x SE <= T``;

the second is the stricter, so it sizes. alpha is compare's one-sided level, 2.5%.

compare pairs the two sides prompt by prompt and gives no verdict when more than a fifth of a
side's prompts have no partner (:mod:`specbench.compare.pairing`): a candidate must send the
baseline's prompts, the same workload with the same seed and count. The paired change's SE is at
most that of two independent sides (per-prompt counts of the same prompt do not anti-correlate),
``sqrt(2 s^2 / n)``, s the per-prompt standard deviation of the statistic, read off a run's own
units (jackknife SE x sqrt(units)). Measured on the recipe's real rerun (cpu-gate-rerun against
cpu-gate, 176 prompts paired): its paired SEs are 0.84-1.11x (median 0.98) that unpaired bound, so
pairing carries little information between reruns (bf16 near-ties change a prompt's counts) and the
bound is what sizes. So n prompts per side decide every tolerance when

    n >= 2 s^2 z^2 / T^2

each a distinct prompt (a greedy repeat is no new evidence). ``--gate-baseline RUN`` checks that
the baseline holds that many by its own spread and sends the candidate the same prompts;
``--as-baseline`` reads s off a pilot run and sizes a new baseline, 50% larger (below).

The size is fixed before the run from the pilot or baseline, never from the run's own running
estimate: a load that stops when its own numbers look precise enough picks the samples that happen
to look so (docs/methods.md, "Precision-driven load"). A margin of 30% covers the pilot's estimate
of s^2 (its relative SE at 200 prompts is ~10-15%) and compare's floor on the SE (the within-draw
variance): at 176 prompts, 1.32x the recipe's hardest check's own need, every boundary rate of
benchmarks/gate_error_rates.py section 0 is met (docs/gate.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from specbench.analysis.intervals import count_matrix, count_stats, jackknife_var
from specbench.compare.gates import POWER, Gate
from specbench.compare.registry import row_name, stat_key
from specbench.compare.sides import load_side
from specbench.errors import ConfigError

ALPHA = 0.025  # compare's one-sided level per check (95% intervals)
MARGIN = 1.3


@dataclass
class CheckSize:
    cell: str
    check: str  # per_position[2]
    tolerance: float
    base: float
    se_base: float
    sd_unit: float
    n_alike: int  # prompts each side needs (the candidate sending the baseline's prompts), with the margin
    n_min: int = 0  # the same without the margin: what a run's own spread asks of that run
    why: str = ""  # a check that needs nothing: its tolerance reaches the metric's worst value


@dataclass
class Sizing:
    baseline: str
    checks: list[CheckSize] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # gates this sizing cannot speak for (latency, speed-up)
    notes: list[str] = field(default_factory=list)  # how the sizing was made, where it is not the plain way
    m: int = 0  # the checks Holm holds together: the acceptance ones sized here and the other gates'
    z: float = 0.0
    prompts: int = 0  # distinct prompts the run's smallest gated cell sent

    @property
    def needed(self) -> int:
        """Distinct prompts per cell and side: the largest any check needs (0 when none needs any)."""
        return max((c.n_alike for c in self.checks if not c.why), default=0)

    @property
    def too_weak(self) -> list[CheckSize]:
        """Checks the run's own prompts are too few for, by its own spread (no margin: the margin
        covers a pilot's estimate standing in for another run)."""
        return [c for c in self.checks if not c.why and c.n_min > self.prompts]

    def hardest(self) -> CheckSize | None:
        sized = [c for c in self.checks if not c.why]
        return max(sized, key=lambda c: c.n_alike) if sized else None


def size_gates(
    baseline: Path, gates: list[Gate], *, holm: bool = True, only: set[tuple[tuple[str, str], ...]] | None = None
) -> Sizing:
    """Prompts per cell each acceptance check of ``gates`` needs against the run ``baseline``.

    ``only``: the cell keys (:func:`specbench.compare.sides.cell_key`) of the study about to run;
    the baseline's other cells are left out, of the sizes and of Holm's family (a pilot may have
    cells the gated study dropped)."""
    from scipy.stats import norm

    side = load_side(Path(baseline))
    out = Sizing(baseline=str(baseline))
    planned: list[tuple[str, str, Gate, list, int, str]] = []
    sizes: list[int] = []
    others = 0  # checks of other gates: Holm holds them in the same family, so they raise z
    cells = [c for c in side.cells.values() if only is None or c.key in only]
    if not cells:  # a pilot of another study (other axes): its spread is the estimate there is
        cells = list(side.cells.values())
        if only is not None:
            out.notes.append(f"{baseline} has none of this study's cells: sized from all of its cells")
    for gate in gates:
        if gate.metric.source != "acceptance":
            out.skipped.append(f"{gate.expr}: {gate.metric.name} is not sized by prompts (timing noise is not)")
            others += sum(1 for cell in cells if gate.selects(dict(cell.key)))
            continue
        for cell in cells:
            if cell.is_baseline or not gate.selects(dict(cell.key)):
                continue
            k = cell.k or 0
            if len(cell.units) < 2 or not k:
                raise ConfigError(
                    f"--gate-baseline {baseline}: cell {cell.name} has {len(cell.units)} unit(s) with counts; "
                    "sizing needs a baseline run with per-request counts (2 or more requests)"
                )
            sizes.append(len(cell.prompt_clusters()) or len(cell.units))
            indices = list(range(k)) if gate.all_positions else [gate.index]
            for i in indices:
                if i is not None and i >= k:
                    continue  # compare makes that check inconclusive (the baseline has no such position)
                planned.append((cell.name, row_name(gate.metric, i), gate, cell.units, k, stat_key(gate.metric, i)))
    out.m = len(planned) + others
    out.prompts = min(sizes, default=0)
    if not planned:
        return out
    out.z = float(norm.ppf(1 - ALPHA / (out.m if holm else 1)) + norm.ppf(POWER))
    for name, check, gate, units, k, key in planned:
        mat = count_matrix(units, k)
        total = mat.sum(axis=0)
        base = float(count_stats(total, k)[key])
        loo = count_stats(total - mat, k)[key]
        se_b = math.sqrt(jackknife_var(loo))
        sd = se_b * math.sqrt(len(units))
        tol = gate.tolerance(base)
        worst = base - 1.0 if gate.metric.name == "mean_acceptance_length" else base
        if tol >= worst:
            out.checks.append(CheckSize(name, check, tol, base, se_b, sd, 0, why="no drop past it is possible"))
            continue
        exact = 2 * (sd * out.z / tol) ** 2 if tol > 0 else 10.0**9
        out.checks.append(CheckSize(name, check, tol, base, se_b, sd, math.ceil(MARGIN * exact), math.ceil(exact)))
    return out


def describe(s: Sizing) -> list[str]:
    """What the sizing found, one line each (for --dry-run and run's plan)."""
    hard = s.hardest()
    skipped = [f"#   not sized: {why}" for why in s.skipped] + [f"#   {note}" for note in s.notes]
    if hard is None:
        return [f"# gate: no acceptance check to size against {s.baseline}", *skipped]
    lines = [
        f"# gate: {len(s.checks)} acceptance check(s): a harm of 2x each tolerance fails with {POWER:.0%} "
        f"probability at alpha {ALPHA}/{s.m} (Holm over all {s.m} checks), no change passes with more; "
        f"per-prompt spread read off {s.baseline}"
    ]
    lines.append(
        f"#   ~{s.needed:,} distinct prompts per cell (both sides, paired) to decide every tolerance, with a "
        f"{MARGIN - 1:.0%} margin for a pilot's noise; {hard.n_min:,} by this run's own spread (hardest: {hard.cell} {hard.check}, "
        f"tolerance {hard.tolerance:.3g}); {s.baseline} sent {s.prompts:,}"
    )
    return lines + skipped

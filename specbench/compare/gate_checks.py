"""Gate checks over a comparison: three-state results, family-wise control, usage errors.

- :func:`validate`: a gate no run can satisfy (an axis or value no cell of either run has, a
  position >= every cell's k) is a usage error (GateError, exit 2), not a quiet pass.
- :func:`apply_gates`: every gate is checked in every cell it applies to (a no-speculation cell has
  no acceptance; a position >= that cell's k does not exist there). A cell on one side only or
  failed gives an inconclusive check for every gate that selects it; a gate that selects no cell at
  all gives one inconclusive check; a pass in a cell some of whose repeats failed is inconclusive.
  A latency / throughput check with one repeat a side is within-run only: it fails only past its
  metric's noise floor (:mod:`specbench.compare.noise`), else it is inconclusive.
- Holm over the whole compare: every decided check of every cell and every gate line is one
  family. Per check, a no-change compare of the default study (6 cells) under the default gates
  plus ``acceptance_length:0`` (30 checks at 2.5% each) exited 1 in 10-18% of A/A studies drawn
  from its real requests (tests/compare/test_run_level_error.py); Holm only inside a ``[*]`` gate
  left the AL gates uncorrected. With Holm on (the default) the chance that any check of the
  compare fails falsely is <= (1 - confidence) / 2. Inconclusive checks test nothing and are not
  in the family.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from specbench.compare import power
from specbench.compare.gates import Gate, GateError, decide_row, harm_of, minimum_detectable
from specbench.compare.noise import BETWEEN, WITHIN, allowed, not_after_holm, within_run
from specbench.compare.registry import row_name
from specbench.compare.sides import Side, SideCell
from specbench.compare.verdicts import Block, CellComparison, Comparison, GateResult, MetricRow, Status


def validate(gates: list[Gate], base: Side, cand: Side) -> None:
    """GateError naming the gate when it asks for something neither run can have."""
    axes: dict[str, set[str]] = {}
    for side in (base, cand):
        for axis, values in side.axis_values().items():
            axes.setdefault(axis, set()).update(values)
    ks = [k for k in (base.max_k(), cand.max_k()) if k]
    for g in gates:
        for axis, wanted in g.cells:
            if axis not in axes:
                have = ", ".join(sorted(axes)) or "none (single files)"
                raise GateError(
                    f"{_where(g)}gate {g.describe()!r}: no cell of either run has an axis {axis!r} (axes: {have}); "
                    "fix the cells: selector"
                )
            unknown = [v for v in wanted if v not in axes[axis]]
            if unknown:
                raise GateError(
                    f"{_where(g)}gate {g.describe()!r}: no cell of either run has {axis}={unknown[0]} "
                    f"(values: {', '.join(sorted(axes[axis]))}); fix the cells: selector"
                )
        if g.metric.indexed and g.index is not None and not g.all_positions and ks and g.index >= max(ks):
            raise GateError(
                f"{_where(g)}gate {g.expr!r}: position {g.index} does not exist: the runs have k = {max(ks)} "
                f"(positions 0..{max(ks) - 1})"
            )


def _where(gate: Gate) -> str:
    return f"{gate.origin}: " if gate.origin else ""


def applies(gate: Gate, axes: dict, is_baseline: bool, k: int | None) -> bool:
    """Whether ``gate`` has a check in a cell with these axes (not: whether that check can be decided)."""
    if not gate.selects(axes):
        return False
    if is_baseline and gate.metric.source in ("acceptance", "study"):
        return False  # a no-speculation cell has no acceptance, and is the reference of speedup
    return not (gate.metric.indexed and gate.index is not None and not gate.all_positions and k and gate.index >= k)


def missing_cells(base: Side, cand: Side) -> list[CellComparison]:
    """A row-less CellComparison for every cell that is not finished on both sides, saying why."""
    out = []
    keys = dict.fromkeys(list(base.cells) + list(cand.cells) + list(base.failed) + list(cand.failed))
    for key in keys:
        if key in base.cells and key in cand.cells:
            continue
        why = []
        for label, side in (("baseline", base), ("candidate", cand)):
            if key in side.failed:
                why.append(f"failed in the {label} ({side.failed[key].reason})")
            elif key not in side.cells:
                why.append(f"not in the {label}")
        cell = _any_cell(key, base, cand)
        out.append(
            CellComparison(
                name=cell.name,
                axes=cell.axes,
                base_ids=[],
                cand_ids=[],
                base_units=0,
                cand_units=0,
                unit_kind=None,
                missing="; ".join(why),
                key=key,
                is_baseline=bool(getattr(cell, "is_baseline", False)),
            )
        )
    return out


def _spec_off_failure(key, base: Side, cand: Side) -> str:
    """Why a candidate cell that failed for lack of drafts (the runner's NO_SPEC_COUNTS, after its
    load finished) is a regression: the baseline's cell drafted. "" otherwise."""
    failed, done = cand.failed.get(key), base.cells.get(key)
    if failed is None or not failed.spec_off or done is None or not done.units:
        return ""
    return (
        f"speculation off in the candidate: the cell's load finished but /metrics showed no drafts "
        f"({failed.reason}), where the baseline made {sum(u.num_drafts for u in done.units)} drafts"
    )


def _any_cell(key, base: Side, cand: Side):
    for side in (base, cand):
        for d in (side.cells, side.failed):
            if key in d:
                return d[key]
    raise KeyError(key)


def _missing_result(cell, g: Gate, off: str) -> GateResult:
    """A gate on a cell one side lacks: a fail for an acceptance gate where the candidate turned
    speculation off (``off`` says how), else inconclusive (no data)."""
    failed = bool(off) and g.metric.source == "acceptance"
    return GateResult(
        cell=cell.name,
        gate=g.describe(),
        metric=g.row,
        status=Status.FAIL if failed else Status.INCONCLUSIVE,
        message=f"{g.row}: {off}" if failed else f"{g.row}: no data: the cell {cell.missing}",
        p_value=0.0 if failed else None,
    )


def apply_gates(comp: Comparison, gates: list[Gate], base: Side, cand: Side) -> None:
    """Fill every cell's gate results, list gates that matched nothing, then run the steps over the
    whole compare (:data:`OVER_COMPARE`: Holm, the minimum detectable change, the power judgement)."""
    for cell in comp.cells:
        info = _any_cell(cell.key, base, cand)
        if cell.missing:
            off = _spec_off_failure(cell.key, base, cand)
            cell.gates += [
                _missing_result(cell, g, off) for g in gates if applies(g, cell.axes, info.is_baseline, info.k)
            ]
        else:
            apply_cell(cell, gates, base.cells[cell.key], cand.cells[cell.key], comp.confidence)
    comp.unmatched += _unmatched(comp, gates)
    comp.family = len(comp.tested)  # Holm's m: what was tested before any step over the compare
    for step in OVER_COMPARE:
        step(comp)
    for cell in comp.cells:
        finish_rows(cell)


def _unmatched(comp: Comparison, gates: list[Gate]) -> list[GateResult]:
    """One inconclusive check for every gate that selected no cell."""
    hit = {r.gate for c in comp.cells for r in c.gates}
    return [
        GateResult(
            cell="(no cell)",
            gate=g.describe(),
            metric=g.row,
            status=Status.INCONCLUSIVE,
            message=f"{g.describe()} applies to no cell of either run (its selector, or a "
            "no-speculation cell only): nothing was checked",
        )
        for g in gates
        if g.describe() not in hit
    ]


def apply_cell(cell: CellComparison, gates: list[Gate], bc: SideCell, cc: SideCell, confidence: float = 0.95) -> None:
    """The checks of every gate that applies to this matched cell: each decided
    (:func:`~specbench.compare.gates.decide`), then through :data:`IN_CELL` in order (Holm needs
    every cell: not here)."""
    by_name = {r.name: r for r in cell.rows}
    # a position either side has is a check: one the other side lacks is inconclusive, never dropped
    k = max([x for x in (bc.k, cc.k) if x] or [0]) or None
    failed = (*bc.failed_repeats, *cc.failed_repeats)
    for gate in gates:
        if not applies(gate, bc.axes, bc.is_baseline, k):
            continue
        holding = tuple(b for b in cell.blocks if b.holds(gate.metric))
        for check in _decisions(cell.name, gate, by_name, bc, cc, confidence):
            at = InCell(gate, by_name.get(check.metric), holding, failed, confidence)
            for step in IN_CELL:
                check = step(check, at)
            units, unit = _sample(at.row, gate, cell, bc, cc)
            cell.gates.append(replace(check, units=units, unit=unit))


@dataclass(frozen=True)
class InCell:
    """What a step of :data:`IN_CELL` reads besides the check: its gate, its row (None: the cell
    has no row of it), the cell's blocks that hold the gate's metric, the cell's failed repeats and
    the compare's confidence."""

    gate: Gate
    row: MetricRow | None
    blocks: tuple[Block, ...]
    failed: tuple[str, ...]
    confidence: float


def scoped(check: GateResult, at: InCell) -> GateResult:
    """The row's scope; a within-run-only row's check is held to its noise floor
    (:func:`~specbench.compare.noise.within_run`: a whole-run shift is not inside its interval)."""
    if at.row is None:
        return check
    if at.row.scope == WITHIN:
        return within_run(at.gate, at.row, check, at.confidence)
    return replace(check, scope=at.row.scope)


def blocked(check: GateResult, at: InCell) -> GateResult:
    """The check under the cell's blocks that hold its metric. Speculation off (0 drafts after a
    finished load) fails whatever else is unknown: a server that did not speculate attests no k or
    head variant, and that must not hide the failure; any other block makes it inconclusive."""
    if not at.blocks:
        return check
    holding = sorted(at.blocks, key=lambda b: b.status != Status.FAIL)
    block, others = holding[0], tuple(f"also: {b.reason}" for b in holding[1:])
    name = check.metric
    if block.status == Status.FAIL:  # no sampling error in "no drafts at all"
        return replace(
            check, status=Status.FAIL, p_value=0.0, undecided="", message=f"{name}: {block.reason}", notes=others
        )
    if check.status != Status.INCONCLUSIVE or check.undecided:
        return replace(
            check,
            status=Status.INCONCLUSIVE,
            undecided="",  # blocked: its interval is not evidence, so it is not in Holm's family
            message=f"{name}: not decided: {block.reason} ({check.message})",
        )
    return replace(check, notes=(*check.notes, f"also: {block.reason}"))


def failed_repeats(check: GateResult, at: InCell) -> GateResult:
    """A pass in a cell some of whose repeats failed is inconclusive (a straddling check stays
    undecided: it was tested)."""
    if check.status != Status.PASS or not at.failed:
        return check
    return replace(
        check,
        status=Status.INCONCLUSIVE,
        message=f"{check.message}; not a pass: {len(at.failed)} repeat(s) of this cell failed ({at.failed[0]})",
    )


def _sample(
    row: MetricRow | None, gate: Gate, cell: CellComparison, bc: SideCell, cc: SideCell
) -> tuple[int | None, str]:
    """How many units a check's SE rests on, and what they are (its "needs ~N prompts")."""
    if row is None:
        return None, ""
    if row.scope == BETWEEN and row.df is not None:
        return int(row.df) + 1, "repeats"  # Welch over repeats, df = min(n) - 1
    source = gate.metric.source
    if source == "acceptance":
        pr = cell.pairing
        if pr is not None and pr.kind == "paired":
            return pr.shared, "prompts"
        if pr is not None and pr.kind == "unpaired":
            return min(pr.baseline_prompts, pr.candidate_prompts), "prompts"
        return min(cell.base_units, cell.cand_units) or None, f"{cell.unit_kind or 'unit'}s"
    if source == "requests":
        lb, lc = bc.latency.get(row.name) or [], cc.latency.get(row.name) or []
        if lb and lc:
            return min(len(lb), len(lc)), "requests"
        return min(len(bc.summary.get(row.name) or []), len(cc.summary.get(row.name) or [])) or None, "repeats"
    if source == "summary":
        tb, tc = bc.throughput_units()[0], cc.throughput_units()[0]
        if len(tb) >= 2 and len(tc) >= 2:
            return min(len(tb), len(tc)), "requests"
        return min(len(bc.summary.get(row.name) or []), len(cc.summary.get(row.name) or [])) or None, "repeats"
    return min(len(bc.requests), len(cc.requests)) or None, "requests"


def _decisions(cell: str, gate: Gate, rows: dict[str, MetricRow], bc: SideCell, cc: SideCell, confidence: float):
    """The gate's checks in one cell, as decided: one per metric instance it names."""
    names = (
        [n for n, r in rows.items() if r.metric is gate.metric]
        if gate.all_positions
        else [n for n in [row_name(gate.metric, gate.index)] if n in rows]
    )
    kb, kc = bc.k, cc.k
    one_side = []  # positions one side has and the other lacks (k differs): checks that cannot be made
    if gate.metric.indexed and kb and kc and kb != kc:
        wanted = range(max(kb, kc)) if gate.all_positions else [gate.index]
        one_side = [i for i in wanted if i is not None and min(kb, kc) <= i < max(kb, kc)]
        names = [n for n in names if n not in {row_name(gate.metric, i) for i in one_side}]

    def undecidable(name: str, why: str) -> GateResult:
        return GateResult(
            cell=cell,
            gate=gate.describe(),
            metric=name,
            status=Status.INCONCLUSIVE,
            message=f"{name}: {why}",
        )

    for i in one_side:
        yield undecidable(
            row_name(gate.metric, i),
            f"position {i} exists on one side only (baseline k = {kb}, candidate k = {kc}): "
            "no comparison; compare runs of the same k",
        )
    if not names and not one_side:
        yield undecidable(gate.row, _missing(gate, bc, cc))
    for n in names:
        yield decide_row(gate, rows[n], confidence=confidence, cell=cell)


def _missing(gate: Gate, bc: SideCell, cc: SideCell) -> str:
    if gate.metric.source == "acceptance" and bool(bc.units) != bool(cc.units):
        return f"acceptance measured only on the {'baseline' if bc.units else 'candidate'}"
    if gate.metric.source == "acceptance":
        return "no acceptance counts on either side (acceptance.json missing or empty)"
    if gate.metric.source == "study":
        return (
            "needs, on both sides, a no-speculation baseline serving the same target (same mla and "
            "target env/flag axes; baseline: true) and finished requests in this cell"
        )
    return "not measured on both sides (no requests.jsonl or summary.json with it)"


def holm_reject(p_values: list[float], alpha: float) -> list[bool]:
    """Holm's step-down: which hypotheses to reject with family-wise error <= ``alpha``."""
    m = len(p_values)
    out = [False] * m
    for i, j in enumerate(sorted(range(m), key=lambda j: p_values[j])):
        if p_values[j] > alpha / (m - i):
            break
        out[j] = True
    return out


def holm(comp: Comparison, alpha: float | None = None) -> None:
    """Holm's step-down over every decided check of the compare (all cells x all gate lines), at
    family-wise level ``alpha`` (default the compare's one-sided (1 - confidence) / 2); nothing
    under ``--no-holm`` (``comp.holm`` False).

    A check fails only if it failed at the per-check level and Holm rejects it. A decided check
    without a p-value (none is built so; kept as a guard) cannot take part: a failure there is
    made inconclusive, never left to fail uncorrected nor turned into a pass."""
    if not comp.holm:
        return
    alpha = (1 - comp.confidence) / 2 if alpha is None else alpha
    results = comp.tested
    m = len(results)
    control = run_control(alpha, m)
    pvals = [1.0 if r.p_value is None else r.p_value for r in results]
    rejected = {id(r): rej for r, rej in zip(results, holm_reject(pvals, alpha))}
    comp.map_checks(lambda r: r if id(r) not in rejected else _after_holm(r, rejected[id(r)], control, m))


def _after_holm(r: GateResult, rejected: bool, control: str, m: int) -> GateResult:
    """A decided check after Holm over ``m`` checks: a failure Holm does not reject passes (an
    interval without a p-value, or within-run only: inconclusive)."""
    r = replace(r, control=control)
    if r.status != Status.FAIL or rejected:
        return r
    if r.p_value is None:
        return replace(
            r,
            status=Status.INCONCLUSIVE,
            message=f"{r.message}; not decided: its interval gives no p-value for the run-level correction over {m} checks",
        )
    if r.scope == WITHIN:
        return not_after_holm(r, m)
    why = (
        f"past the tolerance at the per-check level (p = {r.p_value:.3g}) but not after Holm "
        f"over all {m} checks of this compare"
    )
    return replace(r, status=Status.INCONCLUSIVE, undecided=why, message=f"{r.message}; not decided: {why}")


def detectable(comp: Comparison) -> None:
    """Each decided check's minimum detectable change at the level it was held to: alpha / m under
    Holm over m checks (what a lone true harm must reach), alpha per check without it."""
    alpha = (1 - comp.confidence) / 2
    m = max(comp.decided, 1) if comp.holm else 1

    def step(g: GateResult) -> GateResult:
        if not g.tested or g.se is None or g.tolerance is None:
            return g
        # within-run only: it can fail only past the noise floor, so that is what it detects from
        return replace(g, mdc=minimum_detectable(g.tolerance if g.floor is None else g.floor, g.se, g.df, alpha, m))

    comp.map_checks(step)


# A check's steps after decide, in this order (docs/contracts.md, "Compare"). Each returns a new
# check (dataclasses.replace) or the same one; none edits one. First in its cell, each step given
# the check and what it reads there (InCell) ...
IN_CELL: tuple[Callable[[GateResult, InCell], GateResult], ...] = (scoped, blocked, failed_repeats)
# ... then over the whole compare, once every cell's checks are made (Holm's family is all of them):
# each reads the compare, then replaces every check by what it makes of it.
OVER_COMPARE: tuple[Callable[[Comparison], None], ...] = (holm, detectable, power.judge)


def run_control(alpha: float, m: int) -> str:
    """The error rate the run-level correction holds, in words (every check's ``control``)."""
    return f"run-level: family-wise <= {alpha * 100:.3g}% one-sided over all {m} decided checks (Holm)"


def finish_rows(cell: CellComparison) -> None:
    """Row tolerances from the gates that checked them; verdicts (``worse`` where a check failed)."""

    tol: dict[str, list[float]] = {}
    failed = set()
    for g in cell.gates:
        if g.tolerance is not None:
            tol.setdefault(g.metric, []).append(g.tolerance)
        if g.status == Status.FAIL:
            failed.add(g.metric)
    for row in cell.rows:
        row.tolerance = min(tol.get(row.name, [0.0]))
        blocked = any(b.holds(row.metric) for b in cell.blocks)
        row.verdict = "worse" if row.name in failed else ("~" if blocked else verdict(row))


def verdict(row: MetricRow) -> str:
    """``worse``/``better`` when the CI excludes 0 and the change is past the tolerance (within-run
    only rows: and past the noise floor), else ``~``."""
    if row.delta is None or row.ci is None or any(math.isnan(x) for x in (row.delta, *row.ci)):
        return "~"
    harm, harm_ci = harm_of(row.metric, row.delta, row.ci)
    if harm_ci is None:  # not reached: row.ci is set
        return "~"
    lo, hi = harm_ci
    worse = better = row.tolerance or 0.0
    if row.floor is not None and row.base is not None:  # within-run only: a whole-run shift is no change
        worse, better = (allowed(row.metric, row.base, worse, row.floor, w) for w in (True, False))
    if lo > 0 and harm > worse:
        return "worse"
    if hi < 0 and -harm > better:
        return "better"
    return "~"

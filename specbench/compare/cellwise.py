"""Compare two sides cell by cell: point estimates, deltas, CIs, verdicts and gates.

Pure: :class:`~specbench.compare.sides.Side` objects in, a :class:`Comparison` out; rendering
and exit-code choice live elsewhere. Intervals come from :mod:`specbench.analysis.deltas`
(acceptance: paired by prompt over the prompts both sides have, MOVER of the two cells' score
intervals and never narrower than the jackknife t, see :mod:`specbench.compare.pairing`; latency
medians: BCa; latency and throughput over repeats when both sides have 2+, else within-run only and held to a noise floor: :mod:`specbench.compare.noise`).
Acceptance point estimates come from the exact /metrics diff when both sides have one and every
prompt was paired (units then only give the interval). A cell's :class:`Block` s name reasons its checks cannot be decided (inconclusive).
Gate checks are applied by :mod:`specbench.compare.gate_checks`.
A row's verdict is ``worse``/``better`` only when the CI of the delta excludes 0 *and* the change
is past the row's tolerance (its gate's, else 0); else ``~``.
"""

from __future__ import annotations

import math
from typing import SupportsFloat

import numpy as np

from specbench.analysis import deltas as iv
from specbench.analysis.intervals import t_quantile, within_var
from specbench.analysis.rates import total
from specbench.compare import exact, gate_checks
from specbench.compare.gates import Gate
from specbench.compare.guard import sized_subset
from specbench.compare.noise import scope_rows, scope_warning
from specbench.compare.pairing import Pairing, pair, text_clash
from specbench.compare.registry import METRICS, Metric, row_name, stat_key
from specbench.compare.sides import Side, SideCell

# The records of a comparison live one layer down (verdicts.py), so checks and noise can use them
# without importing this module; re-exported here, where callers have always found them.
from specbench.compare.verdicts import (
    Block,
    CellComparison,
    Comparison,
    GateResult,  # noqa: F401 - re-exported (compare/__init__.py)
    MetricRow,
    Status,
)
from specbench.compare.within_run import speedup_delta, study_figures
from specbench.records.attestation import axis_fields, confounds
from specbench.records.baseline import draft_axes_of, pick_baseline
from specbench.records.cell import Attested
from specbench.records.counts import Counts


def compare_sides(
    base: Side,
    cand: Side,
    gates: list[Gate],
    *,
    default_gates: bool = False,
    mismatches: list[str] | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    holm: bool = True,
    noise_floors: dict | None = None,
) -> Comparison:
    """Match cells by axis values, compute every metric row, apply every gate that selects a cell.

    ``noise_floors``: ``{metric: noise.Floor}`` for latency and throughput checks with one repeat a
    side (default :func:`specbench.compare.noise.default_floors`). GateError (exit 2) for a gate no
    run can satisfy (unknown axis or value, position >= k). A check passes only when its interval
    lies within its tolerance (:mod:`specbench.compare.power`).
    """
    gate_checks.validate(gates, base, cand)
    warnings: list[str] = []
    cells = _matched_cells(base, cand, warnings, n_resamples, seed, confidence, noise_floors)
    cells += gate_checks.missing_cells(base, cand)
    warnings = _side_warnings(base, cand) + warnings
    warnings += [f"baseline cell skipped: {s}" for s in base.skipped] + [
        f"candidate cell skipped: {s}" for s in cand.skipped
    ]
    comp = Comparison(
        base_label=base.label,
        cand_label=cand.label,
        cells=cells,
        only_base=[c.name for k, c in base.cells.items() if k not in cand.cells],
        only_cand=[c.name for k, c in cand.cells.items() if k not in base.cells],
        mismatches=list(mismatches or []),
        warnings=warnings,
        gates=[g.describe() for g in gates],
        default_gates=default_gates,
        confidence=confidence,
        n_resamples=n_resamples,
        holm=holm,
    )
    gate_checks.apply_gates(comp, gates, base, cand)
    comp.warnings += scope_warning(comp)
    return comp


def _matched_cells(
    base: Side,
    cand: Side,
    warnings: list[str],
    n_resamples: int,
    seed: int,
    confidence: float,
    floors: dict | None,
) -> list[CellComparison]:
    """A comparison of each baseline cell the candidate has too; their warnings go to ``warnings``."""
    cells = []
    subset = sized_subset(base, cand)
    for key, bc in base.cells.items():
        cc = cand.cells.get(key)
        if cc is not None:
            cells.append(
                compare_cell(
                    bc,
                    cc,
                    n_resamples=n_resamples,
                    seed=seed,
                    confidence=confidence,
                    refs=(_matching_baseline(base, bc), _matching_baseline(cand, cc)),
                    warnings=warnings,
                    floors=floors,
                    subset=subset is not None,
                    contrast=axis_fields(base.contrast) if base.contrast else (),
                )
            )
    return cells


def _side_warnings(base: Side, cand: Side) -> list[str]:
    return [f"baseline: {w}" for w in base.warnings] + [f"candidate: {w}" for w in cand.warnings]


def _matching_baseline(side: Side, cell: SideCell) -> SideCell | None:
    """The side's no-speculation cell serving the same target as ``cell`` (same MLA, same target
    env/flag axes), or None: speed-up and divergence are never measured against another target."""
    bases = [(c.axes, None, c) for c in side.cells.values() if c.is_baseline]
    return pick_baseline(cell.axes, None, bases, draft_axes_of(side.manifest))


def compare_cell(
    bc: SideCell,
    cc: SideCell,
    gates: list[Gate] | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    refs: tuple[SideCell | None, SideCell | None] = (None, None),
    warnings: list[str] | None = None,
    floors: dict | None = None,
    subset: bool = False,
    contrast: tuple[str, ...] = (),
) -> CellComparison:
    """Rows of one matched cell. ``refs``: each side's baseline (no-speculation) cell, for speedup and
    divergence_share. ``gates`` are applied here only when given (compare_sides applies them run-wide).
    Latency and throughput rows get their scope (:mod:`specbench.compare.noise`): between repeats,
    or within-run only and held to ``floors`` (default floors when None). ``contrast``: the attested
    fields the sides differ in on purpose (``compare --between``'s axis), not named as a confound."""
    warnings = warnings if warnings is not None else []
    rows, pairing = _acceptance_rows(bc, cc, confidence, warnings)
    rows += _latency_rows(bc, cc, n_resamples, seed, confidence)
    rows += _study_rows(bc, cc, refs, n_resamples, seed, confidence)
    scope_rows(rows, bc, cc, refs, confidence, floors)
    blocks = _cell_blocks(bc, cc, pairing)
    _cell_warnings(bc, cc, pairing, warnings, subset=subset, contrast=contrast)
    out = CellComparison(
        name=bc.name,
        axes=bc.axes,
        base_ids=bc.cell_ids,
        cand_ids=cc.cell_ids,
        base_units=len(bc.units),
        cand_units=len(cc.units),
        unit_kind=bc.unit_kind if bc.unit_kind == cc.unit_kind else f"{bc.unit_kind}/{cc.unit_kind}",
        rows=rows,
        key=bc.key,
        is_baseline=bc.is_baseline,
        blocks=blocks,
        pairing=None if pairing is None else pairing.summary(),
    )
    if gates:
        gate_checks.apply_cell(out, gates, bc, cc, confidence)
    gate_checks.finish_rows(out)
    return out


def _cell_blocks(bc: SideCell, cc: SideCell, pairing: Pairing | None) -> list[Block]:
    """Why some of the cell's checks cannot be decided."""
    blocks: list[Block] = []
    clashes = [f"{side}: {d}" for side, c in (("baseline", bc), ("candidate", cc)) for d in c.disagreements]
    if clashes:  # every check: traffic outside the load, or lost requests, touch latency too
        blocks.append(
            Block(
                "acceptance sources disagree beyond rounding (recorded in acceptance.json): "
                + "; ".join(clashes)
                + "; which one measured the load is unknown"
            )
        )
    if pairing is not None and pairing.blocked:
        blocks.append(Block(pairing.blocked, ("acceptance",)))
    if bc.units and cc.spec_off:
        blocks.append(
            Block(
                f"speculation off in the candidate: {cc.spec_off}, where the baseline made "
                f"{sum(u.num_drafts for u in bc.units)} drafts",
                ("acceptance",),
                Status.FAIL,
            )
        )
    unchecked = [f"{side}: {u}" for side, c in (("baseline", bc), ("candidate", cc)) for u in c.unattested]
    if unchecked:  # the cells' names are claims vLLM never confirmed: what is compared is unknown
        blocks.append(
            Block(
                "not attested (cell.json has no vLLM confirmation of it): "
                + "; ".join(unchecked)
                + "; re-run the side with this specbench, whose servers report what they run"
            )
        )
    return blocks


def _cell_warnings(
    bc: SideCell,
    cc: SideCell,
    pairing: Pairing | None,
    warnings: list[str],
    *,
    subset: bool,
    contrast: tuple[str, ...],
) -> None:
    differ = confounds(_served(bc.attested), _served(cc.attested), contrast)
    if differ:
        warnings.append(
            f"{bc.name}: the runs' servers differ in (attested, baseline vs candidate): {', '.join(differ)}"
        )
    # a candidate sized to the first n of this baseline's prompts leaves the others out on purpose
    if pairing is not None and (pairing.only_cand or (pairing.only_base and not subset)):
        warnings.append(f"{bc.name}: acceptance {pairing.describe()}")


def _served(attested: Attested | None) -> Attested | None:
    """An attested record with its head variant cut to what the head computes (output norm, position-0
    mask). A switchable server attests the shipped variant as ``control`` (the plugin's class running
    the shipped forward, bit for bit: tests/serve/plugin/test_control_vllm.py), a run without the switch
    as vLLM's own class; the two serve the same head, and every compare against
    results/baselines/cpu-default warned that they differ (issue 37)."""
    head = attested.head_variant if attested is not None else None
    if attested is None or head is None:
        return attested
    return attested.with_(head_variant={"output_norm": head.output_norm, "pos0_mask": head.pos0_mask})


def _acceptance_rows(
    bc: SideCell, cc: SideCell, conf: float, warnings: list[str]
) -> tuple[list[MetricRow], Pairing | None]:
    if bc.units and cc.spec_off:
        return _spec_off_rows(bc), None
    if not bc.units or not cc.units:
        return [], None
    bcl, ccl = bc.prompt_clusters(), cc.prompt_clusters()
    clash = text_clash(bc.prompt_texts(), cc.prompt_texts())
    if clash:  # the same ids, other texts: pairing them would compare different prompts as one
        warnings.append(f"{bc.name}: {clash}: compared unpaired")
        bcl = {f"baseline:{p}": c for p, c in bcl.items()}
        ccl = {f"candidate:{p}": c for p, c in ccl.items()}
    pr = pair(bcl, ccl, bc.units, cc.units, cc.sent_prompts())
    if isinstance(pr.base, dict) and isinstance(pr.cand, dict):  # paired: {prompt id: counts}
        deltas = iv.paired_acceptance_deltas(pr.base, pr.cand, conf)
        ub, uc = list(pr.base.values()), list(pr.cand.values())
    else:
        ub, uc = (list(u.values() if isinstance(u, dict) else u) for u in (pr.base, pr.cand))
        deltas = iv.acceptance_deltas(ub, uc, conf, floor="repeat" not in (bc.unit_kind, cc.unit_kind))
        if pr.kind == "unpaired":
            for d in deltas.values():
                d.method = f"unpaired (no prompt in common), {d.method}" if d.method else d.method
    few = pr.too_few()
    k = iv.common_k(ub, uc)
    if few:  # points stay for the table; no interval, so no verdict
        deltas = {key: iv.Delta(d.point, why=few) for key, d in deltas.items()}
    else:
        _flat(deltas, ub, uc, k, paired=isinstance(pr.base, dict), conf=conf)
    pb, pc = (iv.count_stats(iv.count_matrix(u, k).sum(axis=0), k) for u in (ub, uc))
    xb, xc = bc.exact, cc.exact
    if pr.complete and xb is not None and xc is not None and not bc.exact_missing and not cc.exact_missing:
        # exact /metrics counts for the point; the units only for the interval's width
        for side, cell, units in (("baseline", bc, ub), ("candidate", cc, uc)):
            _agree(cell, units, side, warnings)
        k_exact = min(k, len(xb.accepted_per_position or []), len(xc.accepted_per_position or []))
        eb, ec = (iv.count_stats(iv.count_matrix([x], k_exact).sum(axis=0), k_exact) for x in (xb, xc))
        pb = {key: (eb[key] if key in eb else v) for key, v in pb.items()}
        pc = {key: (ec[key] if key in ec else v) for key, v in pc.items()}
    specs = _acceptance_specs(k)
    rows = []
    for metric, i in specs:
        key = stat_key(metric, i)
        b, c = _finite(pb.get(key)), _finite(pc.get(key))
        d = deltas.get(key) or iv.Delta(None, why="not computed")
        scale = exact.scale(metric, b, c)
        delta = None if b is None or c is None else exact.snap(c - b, scale)
        ci = d.ci
        if ci is not None and delta is not None and d.point is not None:
            shift = delta - (exact.snap(d.point, scale) or 0.0)  # re-centre the t interval on the exact point
            lo, hi = exact.snap(ci[0] + shift, scale), exact.snap(ci[1] + shift, scale)
            ci = (lo, hi) if lo is not None and hi is not None else None
        rows.append(
            MetricRow(row_name(metric, i), metric, i, b, c, delta, ci, se=d.se, df=d.df, method=d.method, why=d.why)
        )
    return rows, pr


def _flat(deltas: dict[str, iv.Delta], ub: list[Counts], uc: list[Counts], k: int, paired: bool, conf: float) -> None:
    """Where every unit shows the same change, exactly (:func:`~specbench.compare.exact.flat_changes`):
    a zero-width interval around that change (never decides), or around an exact 0 the within-draw
    floor's t interval, whatever the floats' last bits said."""
    mb, mc = iv.count_matrix(ub, k), iv.count_matrix(uc, k)
    floors: dict[str, float] | None = None
    for key, zero in exact.flat_changes(mb, mc, paired, k).items():
        d = deltas.get(key)
        if d is None or d.ci is None or d.point is None or d.df is None:
            continue
        why = "every unit shows the same change"
        if not zero:
            deltas[key] = iv.Delta(d.point, (d.point, d.point), 0.0, d.df, f"{d.method}; {why}")
            continue
        if floors is None:
            wb, wc = within_var(mb.sum(axis=0), k), within_var(mc.sum(axis=0), k)
            floors = {s: wb.get(s, math.nan) + wc.get(s, math.nan) for s in wb}
        var = floors.get(key, math.nan)
        if not math.isfinite(var) or var <= 0:
            continue
        se = math.sqrt(var)
        h = t_quantile(conf, d.df) * se
        deltas[key] = iv.Delta(0.0, (-h, h), se, d.df, f"{d.method}; {why}: none (exactly), the within-draw floor's t")


def _acceptance_specs(k: int) -> list[tuple[Metric, int | None]]:
    """The acceptance metrics a cell at ``k`` is compared on: AL, DAR, then p_i and alpha_i per position."""
    specs: list[tuple[Metric, int | None]] = [
        (METRICS["mean_acceptance_length"], None),
        (METRICS["draft_acceptance_rate"], None),
    ]
    return specs + [(METRICS["per_position"], i) for i in range(k)] + [(METRICS["conditional"], i) for i in range(k)]


def _spec_off_rows(bc: SideCell) -> list[MetricRow]:
    """A candidate that made no drafts accepted nothing: AL 1 (each step its own token), DAR, p_i
    and alpha_i 0; the baseline's figures from its counts. No interval: a Block decides."""
    k = iv.common_k(bc.units, bc.units)
    counts = [bc.exact] if bc.exact is not None and not bc.exact_missing else bc.units
    pb = iv.count_stats(iv.count_matrix(counts, k).sum(axis=0), k)
    specs = _acceptance_specs(k)
    rows = []
    for metric, i in specs:
        b, c = _finite(pb.get(stat_key(metric, i))), 1.0 if metric.name == "mean_acceptance_length" else 0.0
        rows.append(
            MetricRow(
                row_name(metric, i),
                metric,
                i,
                b,
                c,
                None if b is None else c - b,
                None,
                why="speculation off in the candidate",
            )
        )
    return rows


def _agree(cell: SideCell, units: list[Counts], side: str, warnings: list[str]) -> None:
    u = total(list(units))
    e = cell.exact
    if u is None or e is None:
        return
    if (u.num_drafts, u.accepted_tokens) != (e.num_drafts, e.accepted_tokens):
        warnings.append(
            f"{cell.name} ({side}): per-{cell.unit_kind} units count {u.num_drafts} drafts / "
            f"{u.accepted_tokens} accepted, /metrics {e.num_drafts} / {e.accepted_tokens} (errored "
            "requests or traffic outside the load?): point estimates from /metrics, CIs from the units"
        )


def _latency_rows(bc: SideCell, cc: SideCell, n: int, seed: int, conf: float) -> list[MetricRow]:
    rows = []
    for name in ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms"):
        lb, lc = bc.latency.get(name) or [], cc.latency.get(name) or []
        sb, sc = bc.summary.get(name) or [], cc.summary.get(name) or []
        if lb and lc:  # medians over requests
            b, c = float(np.median(lb)), float(np.median(lc))
            d = iv.median_delta(lb, lc, conf, n, seed)
        elif sb and sc:  # per-repeat summary values: the repeats are the units
            b, c = float(np.mean(sb)), float(np.mean(sc))
            d = iv.mean_delta(sb, sc, conf)
        else:
            continue
        rows.append(
            MetricRow(
                name,
                METRICS[name],
                None,
                b,
                c,
                c - b,
                d.ci,
                se=d.se,
                df=d.df,
                method=d.method,
                why=d.why,
                replicates=d.replicates,
            )
        )
    row = _throughput_row(bc, cc, conf)
    return rows + ([row] if row else [])


def _throughput_row(bc: SideCell, cc: SideCell, conf: float) -> MetricRow | None:
    """The load's output tok/s from summary.json (mean over repeats); its standard error from the
    spread of per-request throughput (relative SE of Σ tokens / Σ e2e over requests) when the
    requests carry them, else from the repeats."""
    name = "output_tok_per_s"
    sb, sc = bc.summary.get(name) or [], cc.summary.get(name) or []
    if not sb or not sc:
        return None
    b, c = float(np.mean(sb)), float(np.mean(sc))
    (tb, eb), (tc, ec) = bc.throughput_units(), cc.throughput_units()
    if len(tb) >= 2 and len(tc) >= 2:
        d = iv.scaled_delta(
            b,
            c,
            iv.ratio_rel_se(tb, eb),
            iv.ratio_rel_se(tc, ec),
            len(tb),
            len(tc),
            conf,
            f"t, SE from per-request throughput, {len(tb)} vs {len(tc)} requests",
        )
    else:
        d = iv.mean_delta(sb, sc, conf)
    return MetricRow(name, METRICS[name], None, b, c, c - b, d.ci, se=d.se, df=d.df, method=d.method, why=d.why)


def _study_rows(
    bc: SideCell, cc: SideCell, refs: tuple[SideCell | None, SideCell | None], n: int, seed: int, conf: float
) -> list[MetricRow]:
    rb, rc = refs
    if bc.is_baseline or cc.is_baseline or rb is None or rc is None:
        return []
    rows = []
    # a cell measured interleaved with its baseline's server: against those requests (run/interleave.py)
    sp = speedup_delta(bc.requests, bc.paired or rb.requests, cc.requests, cc.paired or rc.requests, conf)
    if sp is not None:
        b, c, d = sp
        rows.append(
            MetricRow(
                "speedup", METRICS["speedup"], None, b, c, c - b, d.ci, se=d.se, df=d.df, method=d.method, why=d.why
            )
        )
    figures = study_figures(
        bc.requests, rb.requests, cc.requests, rc.requests, n_resamples=n, seed=seed, confidence=conf
    )
    return rows + [
        MetricRow(
            name, METRICS[name], None, b, c, c - b, ci, method="percentile bootstrap over requests", replicates=reps
        )
        for name, (b, c, ci, reps) in figures.items()
    ]


def _finite(x: SupportsFloat | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)

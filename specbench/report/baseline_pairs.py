"""Divergence and speed-up sections of ``specbench report`` for run directories.

Reads each finished cell's ``requests.jsonl`` and computes, with :mod:`specbench.analysis.divergence`
and :mod:`specbench.analysis.speedup`: for every pair of cells of a repeat, how often their greedy
outputs are identical and where they first diverge, with each cell's plain AL; in a table of its own,
the prefix AL of both cells (acceptance over the verify steps that start inside the prefix they
share: the early output only, so never shown beside plain AL as the same quantity); and for every speculative cell, its speed-up over the baseline cell that serves
the same target (same repeat, same value on every target axis: mla, env:, flag:; see
:func:`specbench.run.cells.pick_baseline`). A cell without such a baseline gets no speed-up, only a
"no matching baseline" row: measuring an mla=off cell against an mla=on baseline would mix two
changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Any

from specbench.analysis.acceptance import point_estimates
from specbench.analysis.divergence import (
    COMMON_PREFIX_DEFINITION,
    CommonPrefixIntervals,
    PairDivergence,
    common_prefix_intervals,
    compare_outputs,
)
from specbench.analysis.kpredict import KPrediction, predict_k
from specbench.analysis.speedup import (
    INTERLEAVED_RERUN_SD,
    RERUN_SD,
    SPEEDUP_LABELS,
    SPEEDUPS,
    Speedup,
    speedup,
    speedups_method,
)
from specbench.axis import axis_label
from specbench.io import atomic_write_text
from specbench.records.requests import RequestRecord
from specbench.render import format as fmt
from specbench.report.categories import (
    CategoryContrast,
    CategoryRow,
    category_records,
    category_rows,
    render_categories,
)
from specbench.report.choosing_k import KPREDICTION_INTRO, kprediction_records, render_kpredictions
from specbench.report.throughput import ThroughputContrast, throughput_contrasts, throughput_rows
from specbench.results.read import as_run
from specbench.results.store import Run
from specbench.run.cells import draft_axes_of, pick_baseline, target_mismatch

# A pair of cells whose outputs differ on more than this share of prompts is flagged: its acceptance
# difference is as much a different workload as a different draft.
DIVERGENCE_FLAG_SHARE = 0.25


@dataclass
class CellRequests:
    label: str
    axes: dict[str, str]
    repeat: int | None
    is_baseline: bool
    rows: list[RequestRecord]  # requests.jsonl, validated once, tagged with the cell's repeat
    load_tok_per_s: float | None
    host: str | None = None  # manifest cell_hosts (Ray); None: the run's machine
    window: tuple[str, str] | None = None  # cell.json started_at, ended_at (ISO, UTC)
    # load.interleave: its baseline's requests sent interleaved with this cell's (run/interleave.py)
    paired_rows: list[RequestRecord] | None = None
    paired_load_tok_per_s: float | None = None  # their summary.json throughput


@dataclass
class StudyAnalysis:
    source: str
    pairs: list[tuple[PairDivergence, list[str]]] = field(default_factory=list)  # (pair, axes that differ)
    speedups: list[Speedup] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (spec cell, why no speed-up)
    common_prefix: list[CommonPrefixIntervals | None] = field(default_factory=list)  # one per pair
    kpredictions: list[KPrediction] = field(default_factory=list)
    cell_axes: dict[str, dict[str, str]] = field(default_factory=dict)  # cell label -> axes (plots by axis)
    # per speculative cell whose prompts carry two or more categories: its rows and high-vs-low contrast
    categories: list[tuple[list[CategoryRow], CategoryContrast | None]] = field(default_factory=list)
    # cells differing in one axis, both no-spec or both speculative: the output tok/s ratio
    throughputs: list[ThroughputContrast] = field(default_factory=list)


def read_cells(path: Path | Run, *, prefix: bool = False) -> list[CellRequests]:
    """The finished cells of a run directory with their requests (records tagged with their repeat)."""
    return _read_run(path, prefix)[0]


def _read_run(path: Path | Run, prefix: bool) -> tuple[list[CellRequests], list[str]]:
    """Finished cells and the run's draft-only axes."""
    run = as_run(path)
    out = []

    for cell_id, cell in run.cells.items():
        if cell.status != "done" or not cell.has_requests():
            continue
        rec = cell.record
        tput = (cell.summary or {}).get("results_mean_output_throughput_token_per_s")
        out.append(
            CellRequests(
                label=f"{run.run_id}/{cell_id}" if prefix else cell_id,
                axes={axis_label(str(k)): str(v) for k, v in rec.axes.items()},
                repeat=rec.repeat,
                is_baseline=bool(rec.is_baseline),
                rows=cell.request_records(),
                load_tok_per_s=float(tput) if isinstance(tput, (int, float)) else None,
                host=run.manifest.cell_hosts.get(cell_id),
                window=(rec.started_at, rec.ended_at) if rec.started_at and rec.ended_at else None,
                paired_rows=cell.paired_baseline_records(),
                paired_load_tok_per_s=cell.paired_baseline_tok_per_s(),
            )
        )
    return out, draft_axes_of(run.manifest)


def timing_caveats(spec: CellRequests, base: CellRequests, cells: list[CellRequests]) -> list[str]:
    """Why client timings of ``spec`` and ``base`` may not be comparable (a speed-up assumes one
    machine, one cell at a time, as the local executor runs them): different hosts, or either cell
    sharing its host with another cell running at the same time (the Ray executor can do both)."""
    out = []
    if spec.host and base.host and spec.host != base.host:
        out.append(
            f"ran on another host than the baseline ({spec.host} vs {base.host}): the speed-up "
            "includes any hardware difference"
        )
    for c in (spec, base):
        busy = [o.label for o in cells if o is not c and _overlap(c, o)]
        if busy:
            out.append(
                f"{c.label} ran alongside {', '.join(busy)} on the same host: its timings include "
                "their load (use --max-concurrent-cells 1 or one node per cell for speed-up)"
            )
    return out


def _overlap(a: CellRequests, b: CellRequests) -> bool:
    if a.window is None or b.window is None or (a.host or "") != (b.host or ""):
        return False
    return a.window[0] < b.window[1] and b.window[0] < a.window[1]  # ISO UTC strings order as times


def analyse_run(
    path: Path | Run,
    *,
    prefix: bool = False,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    rerun_sd: float = RERUN_SD,
) -> StudyAnalysis:
    """Divergence between every two cells of a repeat, and each spec cell's speed-up over the baseline."""
    cells, draft_axes = _read_run(path, prefix)
    study = StudyAnalysis(
        source=str(path.path if isinstance(path, Run) else path), cell_axes={c.label: c.axes for c in cells}
    )
    for a, b in combinations(cells, 2):
        if a.repeat != b.repeat:
            continue
        pair = compare_outputs(a.label, a.rows, b.label, b.rows)
        if not pair.n:
            continue
        differs = sorted(k for k in set(a.axes) | set(b.axes) if a.axes.get(k) != b.axes.get(k))
        if a.is_baseline != b.is_baseline:
            spec_c, base_c = (b, a) if a.is_baseline else (a, b)
            mixed = target_mismatch(spec_c.axes, base_c.axes, draft_axes)
            # a baseline serving another target: the divergence mixes speculation with that change
            differs += [
                f"speculation + target ({', '.join(mixed)}): not this cell's baseline" if mixed else "speculation"
            ]
        study.pairs.append((pair, differs))
        study.common_prefix.append(
            common_prefix_intervals(pair, n_resamples=n_resamples, seed=seed, confidence=confidence)
        )
        study.warnings += [f"{a.label} vs {b.label}: {w}" for w in pair.warnings()]
    flagged = [p for p, _ in study.pairs if p.divergence_share > DIVERGENCE_FLAG_SHARE]
    if flagged:
        study.warnings.append(
            f"{len(flagged)} of {len(study.pairs)} cell pairs have greedy outputs that differ on more than "
            f"{DIVERGENCE_FLAG_SHARE:.0%} of prompts (worst: {max(p.divergence_share for p in flagged):.0%}); "
            "acceptance differences between them mix the draft with a changed workload: read the "
            "prefix AL table (both cells on the text they share)"
        )
    _add_speedups(study, cells, draft_axes, confidence=confidence, rerun_sd=rerun_sd)
    study.categories = [
        split for c in cells if not c.is_baseline for split in [category_rows(c.label, c.rows)] if split[0]
    ]
    study.kpredictions = _k_predictions(cells, study, n_resamples=n_resamples, seed=seed, confidence=confidence)
    return study


def run_speedups(path: Path | Run, *, confidence: float = 0.95, interleaved: bool = True) -> StudyAnalysis:
    """Only each speculative cell's speed-up over its own baseline (no divergence pairs): what the
    run's final screen shows. ``interleaved=False`` ignores the requests a cell's baseline answered
    interleaved with it (load.interleave) and measures it against the baseline cell's own load, as
    without interleaving (benchmarks/speedup_reruns.py compares the two on the same runs)."""
    cells, draft_axes = _read_run(path, False)
    if not interleaved:
        cells = [replace(c, paired_rows=None) for c in cells]
    study = StudyAnalysis(
        source=str(path.path if isinstance(path, Run) else path), cell_axes={c.label: c.axes for c in cells}
    )
    _add_speedups(study, cells, draft_axes, confidence=confidence)
    return study


def _add_speedups(
    study: StudyAnalysis,
    cells: list[CellRequests],
    draft_axes: list[str],
    *,
    confidence: float,
    rerun_sd: float = RERUN_SD,
) -> None:
    baselines = [(c.axes, c.repeat, c) for c in cells if c.is_baseline]
    for spec in (c for c in cells if not c.is_baseline):
        base = pick_baseline(spec.axes, spec.repeat, baselines, draft_axes)
        if base is None:
            if baselines:  # a study without baselines asked for no speed-up: nothing to flag
                why = _no_baseline(spec, [b for _, _, b in baselines], draft_axes)
                study.unmatched.append((spec.label, why))
                study.warnings.append(f"{spec.label}: no matching baseline, no speed-up ({why})")
            continue
        try:
            paired = spec.paired_rows  # its baseline's own requests, sent interleaved in time with the cell's
            s = speedup(
                spec.label,
                spec.rows,
                base.label,
                paired or base.rows,
                confidence=confidence,
                rerun_sd=INTERLEAVED_RERUN_SD if paired else rerun_sd,
                load_tok_per_s=(spec.load_tok_per_s, spec.paired_load_tok_per_s if paired else base.load_tok_per_s),
                interleaved=bool(paired),
            )
        except ValueError as exc:
            study.warnings.append(f"{spec.label}: no speed-up ({exc})")
            continue
        if not s.interleaved:
            s.notes += timing_caveats(spec, base, cells)
        study.speedups.append(s)
    study.throughputs = throughput_contrasts(cells, confidence=confidence, rerun_sd=rerun_sd)


def _apart_or_interleaved(speed: list[StudyAnalysis]) -> str:
    """Why a speed-up's interval is as wide as it is: measured apart from its baseline, or interleaved."""
    found = [x for s in speed for x in s.speedups]
    if found and all(x.interleaved for x in found):
        return (
            "whatever else the machine ran fell on both sides of a block pair; speedup.csv gives each "
            'figure\'s rerun range too (docs/methods.md, "Speed-up across reruns").'
        )
    return (
        "a cell and its baseline run minutes apart, so the machine's load between them moves a speed-up more "
        'than its requests do (docs/methods.md, "Speed-up across reruns"; load.interleave measures them in time).'
    )


def cell_k(c: CellRequests) -> int | None:
    """A speculative cell's k, from its requests' per-request counts."""
    ks = {r.spec_decode.num_spec_tokens for r in c.rows if r.spec_decode is not None and r.spec_decode.num_spec_tokens}
    return ks.pop() if len(ks) == 1 else None


def _k_predictions(cells: list[CellRequests], study: StudyAnalysis, **kw: Any) -> list[KPrediction]:
    """For every speculative cell with k >= 2 and a matching baseline: predictions at k' <= k, beside
    the cells measured at k' that differ from it only in num_speculative_tokens."""
    by_label = {c.label: c for c in cells}
    out = []
    for s in study.speedups:
        src, base = by_label[s.cell], by_label[s.baseline]
        k = cell_k(src)
        if k is None or k < 2:
            continue
        rest = {a: v for a, v in src.axes.items() if a != "num_speculative_tokens"}
        measured = {}
        for c in cells:
            kk = cell_k(c) if not c.is_baseline and c is not src and c.repeat == src.repeat else None
            if kk is not None and kk < k and {a: v for a, v in c.axes.items() if a != "num_speculative_tokens"} == rest:
                measured[kk] = (c.label, c.rows)
        try:
            out.append(predict_k(src.label, src.rows, k, base.label, base.rows, measured, **kw))
        except ValueError as exc:
            study.warnings.append(f"{src.label}: no k prediction ({exc})")
    return out


def _no_baseline(spec: CellRequests, baselines: list[CellRequests], draft_axes: list[str]) -> str:
    def values(c: CellRequests, b: CellRequests) -> list[str]:
        return [f"{a}={c.axes.get(a)}" for a in target_mismatch(spec.axes, b.axes, draft_axes)]

    need = ", ".join(values(spec, baselines[0])) if baselines else ""
    have = "; ".join(f"{b.label} ({', '.join(values(b, b))})" for b in baselines if b.repeat == spec.repeat)
    return (
        f"needs a baseline with {need or 'the same repeat'}; the run's: {have or 'none in this repeat'}; "
        "run one (a run from before per-target baselines needs a new run; `specbench run --resume` "
        "re-runs failed cells)"
    )


def _al(units) -> float:
    return point_estimates(units)["mean_acceptance_length"] if units and sum(u.num_drafts for u in units) else math.nan


def _median(xs: list[int]) -> float:
    import statistics

    return float(statistics.median(xs))


def _f(x: float | None, digits: int = 2) -> str:
    return fmt.num(x, digits)


def _same(label: str) -> str:
    return label


def divergence_rows(study: StudyAnalysis, title=_same) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the divergence table (Markdown and CSV share them)."""
    header = [
        "cell A",
        "cell B",
        "differs in",
        "prompts",
        "identical",
        "first divergence (median [min, max])",
        "AL A",
        "AL B",
    ]
    rows = []
    for p, differs in study.pairs:
        pos = sorted(p.positions)
        where = f"{_median(pos):g} [{pos[0]}, {pos[-1]}] {p.unit}s" if pos else fmt.MISSING
        rows.append(
            [
                title(p.a),
                title(p.b),
                ", ".join(differs) or "nothing",
                str(p.n),
                f"{p.identical}/{p.n} ({p.identical_share:.0%})",
                where,
                _f(_al(p.acc_a.plain)),
                _f(_al(p.acc_b.plain)),
            ]
        )
    return header, rows


def prefix_rows(study: StudyAnalysis, title=_same) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the prefix-AL table: both cells over the same verify steps' positions.

    Kept apart from the divergence table's plain AL on purpose: prefix AL covers the early output
    only (and is the per-step acceptance only for independent steps), so it is compared with the
    other cell's prefix AL, never with an AL.
    """
    header = [
        "cell A",
        "cell B",
        "prompts",
        "prefix AL A [CI] (drafts)",
        "prefix AL B [CI] (drafts)",
        "Δ prefix AL B − A [CI]",
    ]
    rows = []
    for (p, _), cp in zip(study.pairs, _common(study)):
        if cp is None:
            cells = [fmt.MISSING] * 3
        else:
            cells = [
                _with(cp.al_a, cp.ci_a, f" ({cp.drafts_a})"),
                _with(cp.al_b, cp.ci_b, f" ({cp.drafts_b})"),
                _with(cp.delta, cp.ci_delta, "", signed=True),
            ]
        rows.append([title(p.a), title(p.b), str(p.n)] + cells)
    return header, rows


def _common(study: StudyAnalysis) -> list[CommonPrefixIntervals | None]:
    return study.common_prefix if len(study.common_prefix) == len(study.pairs) else [None] * len(study.pairs)


def _with(x: float, iv: tuple[float, float], tail: str, signed: bool = False) -> str:
    if fmt.is_missing(x):
        return fmt.MISSING
    return fmt.with_ci(x, iv, 2, sign=signed, no_ci="(no CI: < 2 prompts)") + tail


def speedup_rows(study: StudyAnalysis, title=_same) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the speed-up table."""
    header = (
        ["cell", "requests", "AL"]
        + [SPEEDUP_LABELS[k] for k in SPEEDUPS]
        + ["cost ratio t_verify/t_plain (break-even AL)", "load tok/s ratio (summary.json)"]
    )
    rows = []
    for s in study.speedups:
        cis = [f"{_f(s.point[k])}× [{_f(s.intervals[k][0])}, {_f(s.intervals[k][1])}]" for k in SPEEDUPS]
        rows.append(
            [
                title(s.cell),
                f"{s.n_spec} vs {s.n_base}{' paired' if s.paired else ''}",
                _f(s.spec["mean_acceptance_length"]),
            ]
            + cis
            + [
                f"{_f(s.point['cost_ratio'])} [{_f(s.intervals['cost_ratio'][0])}, {_f(s.intervals['cost_ratio'][1])}]",
                f"{_f(s.load_ratio)}×",
            ]
        )
    for cell, _ in study.unmatched:
        rows.append([title(cell), "no matching baseline"] + [fmt.MISSING] * (len(header) - 2))
    return header, rows


def render_sections(studies: list[StudyAnalysis], md_table, title=_same) -> list[str]:
    """Markdown lines of the divergence and speed-up sections (empty when nothing was measured);
    ``title(label)`` names a cell in the tables."""
    out = _divergence_sections(studies, md_table, title)
    out += _speedup_section(studies, md_table, title)
    out += _throughput_section(studies, md_table)
    out += render_categories([c for s in studies for c in s.categories], md_table, title)
    out += _kprediction_section(studies, md_table, title)
    return out


def _divergence_sections(studies: list[StudyAnalysis], md_table, title) -> list[str]:
    pairs = [s for s in studies if s.pairs]
    if not pairs:
        return []
    out = [
        "## Output divergence between cells",
        "",
        "Greedy outputs of the same prompt (request ids paired, prompt ids checked) compared token by "
        "token: identical share, and where outputs first differ (0-based position). Outputs cut at "
        "max_tokens with equal prefixes count as identical. AL = 1 + A/D from per-request counts "
        "over whole outputs.",
        "",
    ]
    for s in pairs:
        out += [f"Run {s.source}:", "", md_table(*divergence_rows(s, title)), ""]
    out += [
        "## Acceptance on the shared prefix (prefix AL; not an AL)",
        "",
        COMMON_PREFIX_DEFINITION[0].upper() + COMMON_PREFIX_DEFINITION[1:] + ". Needs "
        '`--per-request-spec-decode-metrics detailed`; "–" where the cell has no per-step arrays '
        "or no speculation.",
        "",
    ]
    for s in pairs:
        out += [f"Run {s.source}:", "", md_table(*prefix_rows(s, title)), ""]
    return out


def _speedup_section(studies: list[StudyAnalysis], md_table, title) -> list[str]:
    speed = [s for s in studies if s.speedups or s.unmatched]
    if not speed:
        return []
    method = speedups_method(speed[0].speedups)
    out = [
        "## Speed-up over the no-speculation baseline",
        "",
        "Each speculative cell against the baseline cell serving the same target (same repeat and "
        'the same mla / env: / flag: values; "no matching baseline" where the run has none: another '
        "target's baseline would mix two changes) under the same load (client-side "
        "timings; > 1 = faster with speculation). tok/s = Σ output tokens / Σ e2e; TPOT = Σ (e2e − "
        "ttft) / Σ (tokens − 1); e2e = mean latency. Decomposition = AL ÷ cost ratio, cost ratio = "
        "t_verify / t_plain (a verify step's cost in plain decode steps: the cell's decode time per verify "
        "step over the baseline's TPOT; AL from per-request counts). It is not a prediction: both factors "
        "come from the cell's own timings, so it equals the TPOT speed-up up to the last step's clipped "
        "tokens; it says whether acceptance or step cost decides. Its gap to "
        "the tok/s and e2e speed-ups is what speculation cannot speed up: prefill/TTFT, queueing, "
        f"batching, client overhead. Brackets: {method}; " + _apart_or_interleaved(speed),
        "",
    ]
    for s in speed:
        out += [fmt.md_line(f"Run {s.source}:"), "", md_table(*speedup_rows(s, title)), ""]
        out += [fmt.md_line(f"- {title(x.cell)}: {n}") for x in s.speedups for n in x.notes]
        out += [fmt.md_line(f"- {title(cell)}: no matching baseline: {why}") for cell, why in s.unmatched]
        out.append("")
    return out


def _throughput_section(studies: list[StudyAnalysis], md_table) -> list[str]:
    through = [s for s in studies if s.throughputs]
    if not through:
        return []
    out = [
        "## Throughput between cells",
        "",
        "Cells that differ in one axis (no-spec with no-spec, speculative with speculative): output tok/s "
        "of the first over the second, each Σ output tokens / Σ e2e over its requests (the speed-up's "
        f"definition). Brackets: {speedups_method([through[0].throughputs[0].ratio])}; "
        "significant when they exclude 1×. The within-run interval beside it is what this run's "
        "requests alone allow.",
        "",
    ]
    for s in through:
        out += [fmt.md_line(f"Run {s.source}:"), "", md_table(*throughput_rows(s.throughputs)), ""]
    return out


def _kprediction_section(studies: list[StudyAnalysis], md_table, title) -> list[str]:
    kp = [s for s in studies if s.kpredictions]
    if not kp:
        return []
    out = ["## Choosing k: predicted from per-position acceptance", "", KPREDICTION_INTRO, ""]
    for s in kp:
        out += render_kpredictions(s.kpredictions, s.source, md_table, title)
    return out


def divergence_records(study: StudyAnalysis) -> list[dict[str, Any]]:
    """One numeric row per pair of cells (divergence.csv)."""
    out = []
    for (p, differs), cp in zip(study.pairs, _common(study)):
        pos = sorted(p.positions)
        out.append(
            {
                "run": study.source,
                "cell_a": p.a,
                "cell_b": p.b,
                "differs_in": ";".join(differs),
                "prompts": p.n,
                "identical": p.identical,
                "identical_share": p.identical_share,
                "first_divergence_median": _median(pos) if pos else None,
                "first_divergence_min": pos[0] if pos else None,
                "first_divergence_max": pos[-1] if pos else None,
                "unit": p.unit,
                "mismatched": p.mismatched,
                "unpaired": p.unpaired,
                "al_a": _al(p.acc_a.plain),
                "prefix_al_a": _al(p.acc_a.common),
                "al_b": _al(p.acc_b.plain),
                "prefix_al_b": _al(p.acc_b.common),
                **_common_record(cp),
            }
        )
    return out


def _common_record(cp: CommonPrefixIntervals | None) -> dict[str, Any]:
    if cp is None:
        return {}
    return {
        "prefix_al_prompts": cp.prompts,
        "prefix_al_clusters": cp.clusters,
        "prefix_al_drafts_a": cp.drafts_a,
        "prefix_al_drafts_b": cp.drafts_b,
        "prefix_al_a_ci_low": cp.ci_a[0],
        "prefix_al_a_ci_high": cp.ci_a[1],
        "prefix_al_b_ci_low": cp.ci_b[0],
        "prefix_al_b_ci_high": cp.ci_b[1],
        "prefix_al_delta": cp.delta,
        "prefix_al_delta_ci_low": cp.ci_delta[0],
        "prefix_al_delta_ci_high": cp.ci_delta[1],
    }


def speedup_records(study: StudyAnalysis) -> list[dict[str, Any]]:
    """One numeric row per speculative cell (speedup.csv): speed-ups with CI bounds, both cells' figures."""
    out = []
    for s in study.speedups:
        row: dict[str, Any] = {
            "run": study.source,
            "cell": s.cell,
            "baseline": s.baseline,
            "requests": s.n_spec,
            "baseline_requests": s.n_base,
            "paired": s.paired,
        }
        for k in list(SPEEDUPS) + ["cost_ratio"]:
            name = k if k == "cost_ratio" else f"speedup_{k}"
            row[name] = s.point[k]
            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = s.intervals[k]
            row[f"{name}_within_run_ci_low"], row[f"{name}_within_run_ci_high"] = s.within[k]
            row[f"{name}_rerun_low"], row[f"{name}_rerun_high"] = s.rerun_range.get(k, (float("nan"),) * 2)
        row["rerun_sd_log"] = s.rerun_sd
        row["interleaved"] = s.interleaved
        row.update({f"cell_{k}": v for k, v in s.spec.items()})
        row.update({f"baseline_{k}": v for k, v in s.base.items() if k not in ("mean_acceptance_length", "t_verify_s")})
        row["load_tok_per_s_ratio"] = s.load_ratio
        row["notes"] = "; ".join(s.notes)
        out.append(row)
    for cell, why in study.unmatched:
        out.append({"run": study.source, "cell": cell, "baseline": None, "notes": f"no matching baseline: {why}"})
    return out


def write_study_outputs(
    studies: list[StudyAnalysis], out_dir: Path, title=_same, plots: bool = True, note: str = ""
) -> list[Path]:
    """divergence.csv / speedup.csv / kprediction.csv and (``plots``) their figures (PNG + SVG), when
    there is anything to show; ``title(label)`` names a cell in the figures, ``note`` (provenance) is
    on each."""
    import io

    # pandas and matplotlib only when files are written (run's end-of-run screen imports this module)
    import pandas as pd

    paths: list[Path] = []
    for name, records in (
        ("divergence", divergence_records),
        ("speedup", speedup_records),
        ("kprediction", lambda s: kprediction_records(s.kpredictions, s.source)),
        ("categories", lambda s: category_records(s.categories)),
    ):
        rows = [r for s in studies for r in records(s)]
        if rows:
            buf = io.StringIO()
            pd.DataFrame(rows).to_csv(buf, index=False)
            atomic_write_text(Path(out_dir) / f"{name}.csv", buf.getvalue())
            paths.append(Path(out_dir) / f"{name}.csv")
    if not plots:
        return paths
    from specbench.render.plots.concurrency import write_concurrency_plot  # lazy: pulls in matplotlib
    from specbench.render.plots.curves import save_figure  # lazy: pulls in matplotlib
    from specbench.render.plots.speedup_divergence import divergence_figure, speedup_figure  # lazy: pulls in matplotlib
    from specbench.render.plots.style import noted  # lazy: pulls in matplotlib

    pairs = [p for s in studies for p, _ in s.pairs]
    speeds = [x for s in studies for x in s.speedups]
    if pairs:
        paths += save_figure(noted(divergence_figure(pairs, title), note), Path(out_dir) / "divergence")
    if speeds:
        paths += save_figure(noted(speedup_figure(speeds, title), note), Path(out_dir) / "speedup")
        paths += write_concurrency_plot(
            speeds, {k: v for s in studies for k, v in s.cell_axes.items()}, out_dir, note=note
        )
    return paths

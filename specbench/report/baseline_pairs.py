"""What the divergence and speed-up sections of ``specbench report`` show, computed per run directory
(rendered by :mod:`specbench.report.pair_sections`).

Reads each finished cell's ``requests.jsonl`` and computes, with :mod:`specbench.analysis.divergence`
and :mod:`specbench.analysis.speedup`: for every pair of cells of a repeat, how often their greedy
outputs are identical and where they first diverge, with each cell's plain AL; in a table of its own,
the prefix AL of both cells (acceptance over the verify steps that start inside the prefix they
share: the early output only, so never shown beside plain AL as the same quantity); and for every speculative cell, its speed-up over the baseline cell that serves
the same target (same repeat, same value on every target axis: mla, env:, flag:; see
:func:`specbench.records.baseline.pick_baseline`). A cell without such a baseline gets no speed-up, only a
"no matching baseline" row: measuring an mla=off cell against an mla=on baseline would mix two
changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Any

from specbench.analysis.divergence import (
    CommonPrefixIntervals,
    PairDivergence,
    common_prefix_intervals,
    compare_outputs,
)
from specbench.analysis.kpredict import KPrediction, predict_k
from specbench.analysis.speedup import (
    INTERLEAVED_RERUN_SD,
    RERUN_SD,
    Speedup,
    speedup,
)
from specbench.axis import axis_label, parse_axis
from specbench.records.baseline import draft_axes_of, pick_baseline, target_mismatch
from specbench.records.requests import RequestRecord
from specbench.render.format import shown_text
from specbench.report.categories import (
    CategoryContrast,
    CategoryRow,
    category_rows,
)
from specbench.report.dynamic_k import ServedSchedule, StudySchedule, served_schedules, study_schedules
from specbench.report.throughput import ThroughputContrast, throughput_contrasts
from specbench.results.read import as_run
from specbench.results.store import Run

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
    source: str  # the run's path as every output shows it (render.format.shown_text: no credential)
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
    # a study crossing load:concurrency: the dynamic-K schedule its speed-ups support (report/dynamic_k.py)
    schedules: list[StudySchedule] = field(default_factory=list)
    served: list[ServedSchedule] = field(default_factory=list)  # cells that ran a dynamic-K schedule


def read_cells(path: Path | Run, *, prefix: bool = False) -> list[CellRequests]:
    """The finished cells of a run directory with their requests (records tagged with their repeat)."""
    return _read_run(path, prefix)[0]


def _read_run(path: Path | Run, prefix: bool) -> tuple[list[CellRequests], list[str]]:
    """Finished cells and the run's draft-only axes."""
    run = as_run(path)
    out = []
    # Cells carry axes by label ("synthetic_acceptance_length"), which no longer says that a
    # speculative: axis changes only the draft: name those labels as draft axes (one baseline for all).
    draft_only: list[str] = []
    for cell_id, cell in run.cells.items():
        if cell.status != "done" or not cell.has_requests():
            continue
        rec = cell.record
        draft_only += [axis_label(str(k)) for k in rec.axes if parse_axis(str(k), strict=False).only_drafts]
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
    return out, list(dict.fromkeys([*draft_axes_of(run.manifest), *draft_only]))


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
    run = as_run(path)
    cells, draft_axes = _read_run(run, prefix)
    study = StudyAnalysis(source=shown_text(run.path), cell_axes={c.label: c.axes for c in cells})
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
    ks = {c.label: cell_k(c) for c in cells if not c.is_baseline}
    study.schedules = study_schedules(study.speedups, study.cell_axes, ks, run.manifest.resolved_config or {})
    study.served = served_schedules(cells, run.manifest.resolved_config or {})
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
        source=shown_text(path.path if isinstance(path, Run) else path), cell_axes={c.label: c.axes for c in cells}
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

"""The divergence, prefix AL, speed-up, throughput and k-prediction sections of ``specbench report``:
Markdown tables, CSV records and the files, rendered from the :class:`StudyAnalysis` of each run
directory that :mod:`specbench.report.baseline_pairs` computed (nothing is computed here)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from specbench.analysis.acceptance import point_estimates
from specbench.analysis.divergence import (
    COMMON_PREFIX_DEFINITION,
    CommonPrefixIntervals,
)
from specbench.analysis.speedup import (
    SPEEDUP_LABELS,
    SPEEDUPS,
    speedups_method,
)
from specbench.io import atomic_write_text
from specbench.render import format as fmt
from specbench.report.baseline_pairs import StudyAnalysis
from specbench.report.categories import (
    category_records,
    render_categories,
)
from specbench.report.choosing_k import KPREDICTION_INTRO, kprediction_records, render_kpredictions
from specbench.report.dynamic_k import schedule_json, schedule_markdown, served_markdown
from specbench.report.throughput import throughput_rows


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
    out += schedule_markdown([x for s in studies for x in s.schedules])
    out += served_markdown([x for s in studies for x in s.served])
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
    schedules = [x for s in studies for x in s.schedules]
    if schedules:  # the exact JSON vLLM takes (report/dynamic_k.py)
        atomic_write_text(Path(out_dir) / "schedule.json", schedule_json(schedules))
        paths.append(Path(out_dir) / "schedule.json")
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

"""``specbench report``: acceptance tables, CIs, plots and a Markdown summary for logs or a run dir.

Inputs become labelled groups of summable units (log windows, requests, scrape differences):
unlabelled files give one group per file, ``--label NAME=FILE`` puts files into named groups, and a
run directory gives one group per cell (see :mod:`specbench.report.inputs`). Everything here is
pure apart from :func:`write_report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from specbench.analysis.acceptance import DEFINITION, significant
from specbench.analysis.deltas import acceptance_deltas
from specbench.analysis.frames import summary_frame
from specbench.analysis.intervals import SCORE_JACKKNIFE
from specbench.analysis.speedup import RERUN_SD
from specbench.axis import axis_label
from specbench.errors import ConfigError, SpecbenchError
from specbench.io import atomic_write_bytes, atomic_write_text, marked_incomplete
from specbench.metrics.parse import no_spec_data
from specbench.records.attestation import axis_fields, confounds, not_attested
from specbench.render import format as fmt
from specbench.render.tables import axis_name, cell_title, titles
from specbench.report.baseline_pairs import analyse_run
from specbench.report.csvfile import csv_chunks
from specbench.report.index import figure_note, index_html, run_provenance
from specbench.report.inputs import Group, groups_from_files, groups_from_run, is_run_dir
from specbench.report.pair_sections import render_sections, write_study_outputs
from specbench.report.reference import ReferenceView, reference_figure, reference_rows, reference_view
from specbench.results.read import own_run_id, read_run
from specbench.results.store import Run

MAX_WARNINGS_SHOWN = 20


@dataclass
class CellDifference:
    """Two run-dir cells that differ in exactly one axis; delta = cand - base. (Not
    :class:`specbench.compare.cellwise.Comparison`, which compares two runs.)"""

    axis: str
    base: str  # group labels
    cand: str
    base_value: str
    cand_value: str
    others: dict[str, str]
    values: dict[str, tuple[float, float]]  # stat -> (base, cand)
    delta: dict[str, float]
    intervals: dict[str, tuple[float, float] | None]  # None: too few units on a side for an interval
    degenerate: bool
    # attested fields the two cells differ in beyond the axis (e.g. CPU MLA on forces chunked prefill and
    # prefix caching off), and the axis' own fields that vLLM did not attest on either side
    confounds: list[str] = field(default_factory=list)
    unattested: list[str] = field(default_factory=list)
    repeat: int | None = None  # both cells' repeat

    def sentence(self) -> str:
        parts = []
        for stat, name, n in (("mean_acceptance_length", "AL", 2), ("p0", "p_0", 3)):
            if stat not in self.values:
                continue
            (b, c), iv = self.values[stat], self.intervals.get(stat)
            verdict = ("significant" if significant(iv) else "not significant") if iv else "no CI (too few units)"
            parts.append(
                f"{name} {fmt.num(c, n)} vs {fmt.num(b, n)}, "
                f"Δ {fmt.with_ci(self.delta[stat], iv, n, sign=True)}, {verdict}"
            )
        head = self._head()
        tail = ""
        if self.confounds:
            tail += f"; also differs in (attested): {', '.join(self.confounds)}"
        if self.unattested:
            tail += f"; not attested: {', '.join(self.unattested)}"
        return f"{head}: " + "; ".join(parts) + tail

    def _head(self) -> str:
        """``norm off vs on (MLA on)``: the axis, its two values, the other axes' values."""
        ctx = cell_title(self.others)
        return fmt.one_line(f"{axis_name(self.axis)} {self.cand_value} vs {self.base_value}") + (
            f" ({ctx})" if ctx else ""
        )

    def line(self) -> str:
        """One line: the AL change with its CI and verdict, then the attested confounds."""
        head = self._head()
        stat = "mean_acceptance_length"
        if stat not in self.delta:
            return f"{head}: no AL on a side"
        iv = self.intervals.get(stat)
        verdict = ("significant" if significant(iv) else "not significant") if iv else "no CI (too few units)"
        text = f"{head}: AL {fmt.with_ci(self.delta[stat], iv, 2, sign=True)}, {verdict}"
        if self.confounds:
            text += f"; also differs in {', '.join(self.confounds)}"
        if self.unattested:
            text += f"; not attested: {', '.join(self.unattested)}"
        return text


@dataclass
class Report:
    groups: list[Group]
    summary: pd.DataFrame
    confidence: float
    n_resamples: int
    seed: int
    comparisons: list[CellDifference] = field(default_factory=list)
    source: str = ""
    studies: list = field(default_factory=list)  # report.baseline_pairs.StudyAnalysis per run directory
    titles: dict[str, str] = field(default_factory=dict)  # label -> axis-value title (run-dir cells)
    provenance: list = field(default_factory=list)  # per run: report.index.Provenance
    reference: ReferenceView | None = None  # every cell against one (report.reference)

    def title(self, label: str) -> str:
        return self.titles.get(label, label)


def build_report(
    inputs: list[Path],
    labels: list[tuple[str, Path]] | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    rerun_sd: float = RERUN_SD,
    reference: str | None = None,
) -> Report:
    """Groups from log/scrape/JSONL files and run directories, their summary and comparisons;
    ``rerun_sd`` widens the speed-up intervals (:mod:`specbench.analysis.speedup`); ``reference``
    names the cell every other is set against (:mod:`specbench.report.reference`; default the first)."""
    files = [p for p in inputs if not is_run_dir(p)]
    run_dirs = [p for p in inputs if is_run_dir(p)]
    runs = _distinct_runs(run_dirs)  # each run read once, every part of the report reads that
    prefix = len(run_dirs) > 1  # several runs: cell labels carry the run id
    names: dict[str, str] = {}
    groups: list[Group] = []
    comparisons: list[CellDifference] = []
    studies = []
    for run in runs:
        names.update(titles_of(run, prefix=prefix))
        run_groups = groups_from_run(run, prefix=prefix)
        for g in run_groups:
            g.title = names.get(g.label, g.label)
        groups += run_groups
        comparisons += _comparisons(run_groups, confidence)
        studies.append(
            analyse_run(
                run, prefix=prefix, n_resamples=n_resamples, seed=seed, confidence=confidence, rerun_sd=rerun_sd
            )
        )
    groups += _file_groups(files, labels, any_runs=bool(runs))
    summary = _summary(groups, confidence)
    view = reference_view(groups, reference, confidence, lambda label: names.get(label, label))
    return Report(
        groups=groups,
        summary=summary,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        comparisons=comparisons,
        studies=studies,
        titles=names,
        provenance=[run_provenance(run) for run in runs],
        reference=view,
        source=fmt.shown_text(", ".join([str(p) for p in inputs] + [f"{n}={p}" for n, p in labels or []])),
    )


def _file_groups(files: list[Path], labels: list[tuple[str, Path]] | None, *, any_runs: bool) -> list[Group]:
    file_groups = groups_from_files(files, labels or [])
    if not any_runs and all(not g.units and g.total is None and g.rate_only is None for g in file_groups):
        # An empty table with exit 0 would read as a result: no input held any metric.
        raise no_spec_data([*files, *(p for _, p in labels or [])])
    return file_groups


def _summary(groups: list[Group], confidence: float) -> pd.DataFrame:
    """The summary frame; adds the pooled warnings to each group's own, as a side effect."""
    counted = {g.label: g.units for g in groups}
    summary = summary_frame(
        counted,
        totals={g.label: g.total for g in groups if g.total is not None},
        unit={g.label: g.unit for g in groups},
        confidence=confidence,
    )
    # one list of warnings per group, in the Markdown and in the CSV alike
    for g, pooled in zip(groups, summary["warnings"]):
        if isinstance(pooled, str) and pooled:
            g.warnings += [w for w in pooled.split("; ") if w not in g.warnings]
    # Python strings, not pandas' default pyarrow str: a long log's cell holds every window's
    # warnings, and a pyarrow copy of it would be held beside the Python one being written.
    summary["warnings"] = pd.Series(["; ".join(g.warnings) for g in groups], index=summary.index, dtype=object)
    return summary


def run_titles(run_dir: Path, *, prefix: bool = False) -> dict[str, str]:
    """``{label: title}`` for every cell of a run, baselines included (``MLA on · norm off``;
    ``<run id>/<title>`` when several runs are reported together)."""
    return titles_of(read_run(run_dir), prefix=prefix)


def titles_of(run: Run, *, prefix: bool = False) -> dict[str, str]:
    """:func:`run_titles` of a run already loaded (:class:`specbench.results.store.Run`)."""
    cells = [
        (
            cid,
            {axis_label(str(k)): str(v) for k, v in c.record.axes.items()},
            bool(c.record.is_baseline),
            c.record.repeat,
        )
        for cid, c in run.cells.items()
    ]
    head = f"{run.run_id}/" if prefix else ""
    return {head + cid: head + t for cid, t in titles(cells).items()}


def _distinct_runs(run_dirs: list[Path]) -> list[Run]:
    """Each run read once, in order. Cell labels of several runs carry the run id: the same run
    twice (or a copy of it) would give two groups one label. Refused, naming both."""
    import os

    seen: dict[str, Path] = {}
    for run_dir in run_dirs:
        real = os.path.realpath(run_dir)
        if real in seen:
            raise ConfigError(f"report: {run_dir} is given twice ({seen[real]}); give each run once")
        seen[real] = run_dir
    runs = [read_run(run_dir) for run_dir in run_dirs]
    named = [str(r.run_id) for r in runs]
    for run, run_dir in zip(runs, run_dirs):
        if named.count(str(run.run_id)) > 1 and own_run_id(run.manifest) is None:
            run.manifest.run_id = str(run_dir)  # two vllm bench results of one name: labelled by path
    ids: dict[str, Path] = {}
    for run, run_dir in zip(runs, run_dirs):
        run_id = str(run.run_id)
        if run_id in ids:
            raise ConfigError(
                f"report: {ids[run_id]} and {run_dir} are copies of one run ({run_id}); report one, "
                "or compare them with 'specbench compare'"
            )
        ids[run_id] = run_dir
    return runs


def _comparisons(groups: list[Group], confidence: float) -> list[CellDifference]:
    """Cells of one run that differ in one axis, with compare's interval of the difference (the
    jackknife t of :func:`specbench.analysis.deltas.acceptance_deltas`, unpaired)."""
    out = []
    cells = [g for g in groups if g.axes is not None and g.units]
    # the first value an axis takes in run order is the reference side ("base")
    first_value: dict[str, str] = {}
    axes_of: dict[int, dict[str, str]] = {id(g): g.axes for g in cells if g.axes is not None}
    for g in cells:
        for k, v in axes_of[id(g)].items():
            first_value.setdefault(k, v)
    for i, a in enumerate(cells):
        for b in cells[i + 1 :]:
            ax, bx = axes_of[id(a)], axes_of[id(b)]
            if a.repeat != b.repeat or set(ax) != set(bx):
                continue
            diff = [k for k in ax if ax[k] != bx[k]]
            if len(diff) != 1:
                continue
            axis = diff[0]
            base, cand = (a, b) if ax[axis] == first_value[axis] or bx[axis] != first_value[axis] else (b, a)
            base_axes, cand_axes = axes_of[id(base)], axes_of[id(cand)]
            deltas = acceptance_deltas(base.units, cand.units, confidence)
            pb, pc = base.point(), cand.point()
            stats = [s for s in ("mean_acceptance_length", "p0") if s in deltas and s in pb and s in pc]
            fields = axis_fields(axis)
            out.append(
                CellDifference(
                    axis=axis,
                    base=base.label,
                    cand=cand.label,
                    base_value=base_axes[axis],
                    cand_value=cand_axes[axis],
                    others={k: v for k, v in base_axes.items() if k != axis},
                    values={s: (pb[s], pc[s]) for s in stats},
                    delta={s: pc[s] - pb[s] for s in stats},
                    intervals={s: deltas[s].ci for s in stats},
                    degenerate=any(deltas[s].ci is None for s in stats),
                    confounds=confounds(cand.attested, base.attested, fields),  # read as the head: cand vs base
                    unattested=sorted({f for g in (base, cand) for f in not_attested(g.attested, _checked(fields))}),
                    repeat=base.repeat,
                )
            )
    return out


def _checked(fields: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f for f in fields if f in ("mla", "num_speculative_tokens", "head_variant", "spec_method"))


def contrasts(run_dir: Path, confidence: float = 0.95) -> list[CellDifference]:
    """The contrasts of one run (cells differing in one axis), significant ones first, each group by
    the size of its AL change: what the run's final screen lists."""
    try:
        found = _comparisons(groups_from_run(run_dir), confidence)
    except SpecbenchError:
        return []

    def key(c: CellDifference):
        iv = c.intervals.get("mean_acceptance_length")
        delta = c.delta.get("mean_acceptance_length", 0.0)
        return (not (iv is not None and significant(iv)), -abs(delta))

    return sorted(found, key=key)


def _with_ci(row: pd.Series, stat: str, digits: int = 3) -> str:
    if stat not in row or pd.isna(row[stat]):
        return fmt.MISSING
    iv = None if row.get("ci_degenerate", True) else (row[f"{stat}_ci_low"], row[f"{stat}_ci_high"])
    return fmt.with_ci(row[stat], iv, digits, no_ci="(no CI)")


def _k(summary: pd.DataFrame, prefix: str) -> int:
    k = 0
    while f"{prefix}{k}" in summary.columns:
        k += 1
    return k


def table_rows(report: Report, prefix: str = "p") -> tuple[list[str], list[list[str]]]:
    """Header and cells of the per-group table (shared by Markdown and the Rich table)."""
    k = _k(report.summary, prefix)
    sym = "p" if prefix == "p" else "α"
    header = ["cell" if report.titles else "group", "units", "drafts", "AL", "DAR"] + [f"{sym}_{i}" for i in range(k)]
    rows = []
    for _, row in report.summary.iterrows():
        units = f"{row['n_units']} {row['unit']}{'s' if row['n_units'] != 1 else ''}"
        drafts = fmt.MISSING if pd.isna(row.get("num_drafts")) else str(int(row["num_drafts"]))
        rows.append(
            [
                report.title(str(row["label"])),
                units,
                drafts,
                _with_ci(row, "mean_acceptance_length", 2),
                _with_ci(row, "draft_acceptance_rate"),
            ]
            + [_with_ci(row, f"{prefix}{i}") for i in range(k)]
        )
    return header, rows


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    # every cell one line with | escaped and control characters visible: an axis value, cell id or
    # file name holding "|" or a newline cannot break the table or add a line of its own
    lines = ["| " + " | ".join(fmt.md_cell(c) for c in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt.md_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


MAX_LINES_PER_PANEL = 6


def facets_of(groups: list[Group]) -> list[tuple[str, list[str]]] | None:
    """Panels of the per-position figure when one would hold more than MAX_LINES_PER_PANEL lines
    and the groups vary in two or more axes: one per value of the varying axis with the fewest
    values (the first such), titled by it; None: one panel."""
    if len(groups) <= MAX_LINES_PER_PANEL or any(not g.axes for g in groups):
        return None
    values: dict[str, list[str]] = {}
    for g in groups:
        for k, v in (g.axes or {}).items():
            values.setdefault(k, [])
            if str(v) not in values[k]:
                values[k].append(str(v))
    varying = {k: vs for k, vs in values.items() if len(vs) > 1}
    if len(varying) < 2:
        return None
    axis = min(varying, key=lambda k: len(varying[k]))
    return [
        (cell_title({axis_label(axis): v}), [g.label for g in groups if str((g.axes or {}).get(axis)) == v])
        for v in varying[axis]
    ]


def render_markdown(report: Report, plots: bool = True) -> str:
    """summary.md; ``plots``: whether the figures were written (the file list names only what is there)."""
    pct = f"{report.confidence:.0%}"
    out = _md_head(report, pct)
    out += _md_derived(report)
    out += _md_differences(report, pct)
    out += _md_reference(report, pct)
    out += render_sections(report.studies, _md_table, report.title)
    out += _md_study_warnings(report)
    out += _md_rate_only(report)
    out += _md_warnings(report)
    out += _md_files(report, plots)
    return "\n".join(out)


def _md_head(report: Report, pct: str) -> list[str]:
    return [
        "# specbench acceptance report",
        "",
        f"Inputs: {fmt.md_cell(report.source)}",
        "",
        f"**Acceptance definition:** {DEFINITION}.",
        "",
        f"**Intervals:** {pct} score intervals with a jackknife design effect (`{SCORE_JACKKNIFE}`) over the "
        "group's units (log windows or requests, see the units column): each statistic is a proportion of summed counts (rates are never averaged) "
        "and gets Wilson's score interval, its trials divided by a design effect from the jackknife over the "
        "units (leave one unit out, recompute from the others' sums) and with the t quantile "
        "(df = units with trials - 1) in place of z. It stays inside the statistic's range and never has zero "
        "width; a percentile bootstrap is too narrow over few units (~75% coverage at 3 windows). "
        "Point estimates use exact Prometheus counts where the input has them. "
        '"no CI" marks a group with a single unit, where no interval can be estimated.',
        "",
        "## Unconditional acceptance per position",
        "",
        _md_table(*table_rows(report, "p")),
        "",
        "## Conditional acceptance per position",
        "",
        _md_table(*table_rows(report, "a")),
        "",
    ]


def _md_derived(report: Report) -> list[str]:
    derived = [
        (r["label"], r["derived"])
        for _, r in report.summary.iterrows()
        if isinstance(r.get("derived"), str) and r["derived"]
    ]
    if not derived:
        return []
    return [
        "Derived, not printed: "
        + "; ".join(f"{lab}: {d}" for lab, d in derived)
        + " (num_drafts = drafted / k, cross-checked with accepted / Σp_i; "
        "accepted_per_position = round(p_i · num_drafts)).",
        "",
    ]


def _md_differences(report: Report, pct: str) -> list[str]:
    if not report.comparisons:
        return []
    return [
        "## Differences between cells",
        "",
        f"Cells that differ in one axis; Δ = first minus second, {pct} CI of the difference as "
        "`specbench compare` computes it for unpaired cells (t interval, jackknife SE over units, never "
        "below the two cells' within-draw sampling SE, df = min(n) − 1); "
        "significant when the CI excludes 0.",
        "",
        *[f"- {fmt.md_line(c.sentence())}" for c in report.comparisons],
        "",
    ]


def _md_reference(report: Report, pct: str) -> list[str]:
    ref = report.reference
    if ref is None:
        return []
    return [
        "## Change vs reference",
        "",
        f"Every cell minus the reference cell, **{fmt.md_cell(report.title(ref.reference))}** "
        + ("(chosen with `--reference`)" if ref.chosen else "(the first cell; choose another with `--reference CELL`)")
        + f": ΔAL and Δp_i in percentage points, {pct} CI as in the section above (t, jackknife SE over each "
        "cell's units, unpaired). A change is significant when its CI excludes 0.",
        "",
        _md_table(*reference_rows(ref, report.title)),
        "",
    ]


def _md_study_warnings(report: Report) -> list[str]:
    study_warnings = [w for s in report.studies for w in s.warnings]
    if not study_warnings:
        return []
    return ["## Divergence and speed-up warnings", ""] + [f"- {fmt.md_line(w)}" for w in study_warnings] + [""]


def _md_rate_only(report: Report) -> list[str]:
    rate_only = [g for g in report.groups if g.rate_only is not None]
    if not rate_only:
        return []
    out = ["## Rate-only lines (no counts, not summed)", ""]
    for g in rate_only:
        ro = g.rate_only
        assert ro is not None  # rate_only holds only such groups
        als = [r["mean_acceptance_length"] for r in ro.per_record if r["mean_acceptance_length"] is not None]
        span = f"AL as printed from {min(als):.2f} to {max(als):.2f}, last {als[-1]:.2f}" if als else "no AL printed"
        combined = f"; draft-weighted AL {ro.mean_acceptance_length:.3f}" if ro.weighted else ""
        out.append(fmt.md_line(f"- {g.label}: {ro.n_records} line(s), {span}{combined} ({ro.note})"))
    out.append("")
    return out


def _md_warnings(report: Report) -> list[str]:
    warned = [g for g in report.groups if g.warnings]
    if not warned:
        return []
    out = ["## Warnings", ""]
    for g in warned:
        shown = g.warnings[:MAX_WARNINGS_SHOWN]
        out += [fmt.md_line(f"- {g.label}: {w}") for w in shown]
        if len(g.warnings) > len(shown):
            out.append(fmt.md_line(f"- {g.label}: … and {len(g.warnings) - len(shown)} more"))
    out.append("")
    return out


def _md_files(report: Report, plots: bool) -> list[str]:
    out = [
        "## Files",
        "",
        "- `acceptance.csv`: the table above, one row per group, with CI columns",
        "- `index.html`: all of this on one page, findings first, with provenance and the figures",
    ]
    if plots:
        out += [
            "- `per_position.png` / `.svg`: p_i and α_i per draft position",
            "- `al_over_time.png` / `.svg`: cumulative AL (units so far, in order) with its CI",
        ]
        if report.reference is not None:
            out.append("- `vs_reference.png` / `.svg`: p_i of each cell and the reference, and their difference")
    figure = ", `{0}.png` / `.svg`" if plots else ""
    if any(st.pairs for st in report.studies):
        out.append(f"- `divergence.csv`{figure.format('divergence')}: output divergence between cells")
    if any(st.speedups for st in report.studies):
        out.append(f"- `speedup.csv`{figure.format('speedup')}: speed-up over the baseline cell")
        if plots and any("concurrency" in axes for st in report.studies for axes in st.cell_axes.values()):
            out.append("- `speedup_vs_concurrency.png` / `.svg`: speed-up, AL and step cost per concurrency")
    if any(st.categories for st in report.studies):
        out.append("- `categories.csv`: AL and p_i per prompt category of each speculative cell")
    if any(st.kpredictions for st in report.studies):
        out.append("- `kprediction.csv`: AL and speed-up predicted at each k' <= k, beside measured cells")
    if not plots:
        out.append("- no figures: the report was written with `--no-plots`")
    out.append("")
    return out


def write_report(report: Report, out_dir: Path, plots: bool = True) -> list[Path]:
    """Write summary.md, acceptance.csv, the study CSVs, (``plots``) the figures (PNG + SVG) and
    index.html (all of it on one page) into ``out_dir``. Without ``plots`` matplotlib is never imported."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "summary.md", out_dir / "acceptance.csv"]
    with marked_incomplete(out_dir, "report"):  # an interrupted report leaves a marked partial set
        markdown_text = render_markdown(report, plots)
        atomic_write_text(paths[0], markdown_text)
        atomic_write_bytes(paths[1], csv_chunks(report.summary))  # streamed: a warnings cell can be MBs
        if plots:
            # lazy: matplotlib only when figures are written (run's end-of-run screen imports this module)
            from specbench.render.plots.curves import al_over_time_figure, per_position_figure, save_figure
            from specbench.render.plots.style import encode, noted  # lazy: pulls in matplotlib

            enc = encode([(g.label, g.axes) for g in report.groups])
            note = fmt.one_line(figure_note(report))  # which run, model, k, vLLM and load, on every figure
            figure = per_position_figure(report.summary, report.confidence, enc, facets_of(report.groups))
            paths += save_figure(noted(figure, note), out_dir / "per_position")
            groups = {g.label: g.units for g in report.groups}
            figure = al_over_time_figure(groups, report.summary, enc, report.confidence)
            paths += save_figure(noted(figure, note), out_dir / "al_over_time")
            if report.reference is not None:
                figure = reference_figure(report.reference, report.groups, report.confidence, report.title)
                paths += save_figure(noted(figure, note), out_dir / "vs_reference")
        paths += write_study_outputs(
            report.studies, out_dir, report.title, plots, note=fmt.one_line(figure_note(report))
        )
        page = out_dir / "index.html"
        figures = [p for p in paths if p.suffix == ".svg"]
        atomic_write_text(page, index_html(report, markdown_text, figures, paths, out_dir))
        paths.append(page)
    return paths

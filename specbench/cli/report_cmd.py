"""``specbench report``: acceptance tables, CIs and plots from logs, scrapes or a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from specbench.cli.common import Seed, console, handle_errors, nonempty_path, warn
from specbench.cli.outputs import guard_outputs
from specbench.errors import ConfigError
from specbench.render.format import user_text
from specbench.render.tables import column_chunks

# Option types of report, declared once here so its signature reads as the list of its options.
Inputs = Annotated[
    Optional[list[Path]],
    typer.Argument(
        metavar="FILE|RUN_DIR...",
        help="Server logs, Prometheus scrapes, `specbench parse` JSONL, acceptance.json files, or run directories.",
        show_default=False,
    ),
]
Labels = Annotated[
    Optional[list[str]],
    typer.Option(
        "--label",
        metavar="NAME=FILE",
        help="Put FILE into group NAME (repeatable; several files may share a name).",
    ),
]
OutDir = Annotated[
    Path,
    typer.Option(
        "--out", metavar="DIR", parser=nonempty_path, help="Directory for summary.md, acceptance.csv and plots."
    ),
]
Resamples = Annotated[
    int,
    typer.Option(
        "--resamples",
        min=100,
        max=1_000_000,
        help="Bootstrap resamples (divergence and k-prediction CIs; acceptance CIs are score "
        "intervals, speed-up CIs jackknife t).",
    ),
]
RerunSd = Annotated[
    Optional[float],
    typer.Option(
        "--rerun-sd",
        min=0.0,
        max=5.0,
        metavar="SD",
        help="Between-run SD of a speed-up's log that its CI is widened by, for cells measured apart "
        "from their baseline: the default is the spread measured over reruns on a shared 2-core VM "
        "(docs/methods.md, 'Speed-up across reruns', 0.33); measure your machine's with "
        "benchmarks/speedup_reruns.py; 0 = within this run only. Cells run with load.interleave need none.",
        show_default=False,
    ),
]
Reference = Annotated[
    Optional[str],
    typer.Option(
        "--reference",
        metavar="CELL",
        help="The cell every other is set against in 'Change vs reference' (its id, run id/cell id, "
        "or its title as the tables print it, e.g. 'MLA on · norm on'); default the first speculative cell.",
        show_default=False,
    ),
]
Plots = Annotated[
    bool,
    typer.Option(
        "--plots/--no-plots",
        help="Write the figures (PNG + SVG). --no-plots writes summary.md and the CSVs only, "
        "without loading matplotlib (a CI job that reads the tables saves most of the time).",
    ),
]
Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Print everything: every statistic with its CI, every contrast, each cell's speed-up and k "
        "advice, every file written. Default: one line per cell, the answers, where the report is.",
    ),
]


def report(
    inputs: Inputs = None,
    label: Labels = None,
    out: OutDir = Path("report"),
    resamples: Resamples = 2000,
    seed: Seed = 0,
    rerun_sd: RerunSd = None,
    reference: Reference = None,
    plots: Plots = True,
    verbose: Verbose = False,
) -> None:
    """Acceptance length, draft acceptance rate and per-position acceptance with their CIs."""
    # the report core loads only when the command runs, so `specbench --help` and the other
    # commands never pay for it
    from specbench.report.assemble import build_report, table_rows, write_report  # lazy: pulls in pandas
    from specbench.report.inputs import parse_label  # lazy: pulls in numpy and pydantic

    labels = [parse_label(x) for x in (label or [])]
    guard_outputs([*(inputs or []), *(p for _, p in labels)], dirs={"--out": out})
    if not inputs and not labels:
        raise ConfigError("report: give at least one FILE, run directory or --label NAME=FILE")
    from specbench.analysis.speedup import RERUN_SD  # lazy: pulls in numpy

    rep = build_report(
        list(inputs or []),
        labels,
        n_resamples=resamples,
        seed=seed,
        rerun_sd=RERUN_SD if rerun_sd is None else rerun_sd,
        reference=reference,
    )
    paths = write_report(rep, out, plots)
    if verbose:
        _print_table(rep, table_rows)
        _print_findings(rep, out)
    else:
        _print_compact(rep, table_rows)
        _print_answers(rep, out)
    _print_paths(paths, out, verbose)


def _print_paths(paths: list[Path], out: Path, verbose: bool) -> None:
    """index.html first: the page a reader opens; every path only with --verbose."""
    page = [p for p in paths if p.name == "index.html"]
    if verbose:
        shown = page + [p for p in paths if p not in page]
        console.print(f"wrote {user_text(', '.join(str(p) for p in shown))}", highlight=False)
        return
    tail = f"; open {user_text(page[0])}" if page else ""
    console.print(f"wrote {len(paths)} files to {user_text(out)}{tail} (--verbose lists them)", highlight=False)


def _print_compact(rep, table_rows) -> None:
    """One row per cell: units, AL with its CI, DAR and p_i (their CIs and α_i with --verbose)."""
    from rich import box
    from rich.table import Table

    header, rows = table_rows(rep, "p")
    table = Table(
        title=f"Acceptance ({rep.confidence:.0%} CI; AL = 1 + accepted/drafts; --verbose: every CI and α_i)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column(header[0], justify="left")
    table.add_column("units", justify="right", no_wrap=True)
    table.add_column("AL [CI]", justify="right", no_wrap=True)
    for name in header[4:]:
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(user_text(r[0]), r[1].split(" ", 1)[0], r[3], *(c.split(" ", 1)[0] for c in r[4:]))
    console.print(table)


def _print_answers(rep, out: Path) -> None:
    """The answers index.html leads with, one line each; the warnings as counts."""
    from specbench.report.answers import fixture_caveat, report_answers  # lazy: pulls in numpy

    caveat = fixture_caveat(rep.provenance)
    if caveat:
        console.print(f"Caveat: {user_text(caveat)}", highlight=False)
    for a in report_answers(rep):
        for line in a.lines:
            console.print(f"- {user_text(line)}", highlight=False)  # each line names its axis
        for c in a.confounds:
            console.print(f"  confound: {user_text(c)}", highlight=False)
    warned = [g for g in rep.groups if g.warnings]
    if warned:
        warn(f"{len(warned)} cell(s) with warnings, see {out / 'summary.md'}")
    for st in rep.studies:
        for w in st.warnings:
            warn(w)


def _print_findings(rep, out: Path) -> None:
    from specbench.report.choosing_k import advice_lines  # lazy: pulls in numpy

    for g in rep.groups:
        if g.warnings:
            warn(f"{g.label}: {len(g.warnings)} warning(s), see {out / 'summary.md'}")
    for c in rep.comparisons:
        console.print(user_text(c.sentence()), highlight=False)
    for st in rep.studies:
        for s in st.speedups:
            console.print(
                f"{user_text(rep.title(s.cell))}: speed-up {s.point['output_tok_per_s']:.2f}× output tok/s "
                f"(AL {s.spec['mean_acceptance_length']:.2f} / step cost {s.point['cost_ratio']:.2f})",
                highlight=False,
            )
        for line in advice_lines(st.kpredictions, rep.title):  # the assumptions once, not once per cell
            console.print(user_text(line), highlight=False)
        for w in st.warnings:
            warn(w)


def register(app: typer.Typer) -> None:
    app.command("report")(handle_errors(report))


def _print_table(rep, table_rows) -> None:
    """Statistics as rows and cells as columns, headed by their axis values; as many cells per
    table as fit the terminal (an interval goes under its value), so nothing breaks mid-number."""
    from rich.table import Table

    header, rows = table_rows(rep, "p")
    a_header, a_rows = table_rows(rep, "a")
    stats = header[1:] + a_header[5:]
    flat = [r[1:] + a[5:] for r, a in zip(rows, a_rows)]
    names = [r[0].replace(" · ", "\n") for r in rows]  # one axis value per header line

    def widths(cells: list[list[str]]) -> list[int]:
        return [
            max(len(line) for text in [names[i]] + cells[i] for line in text.split("\n")) for i in range(len(names))
        ]

    first = max(len(s) for s in stats)
    cells = flat
    if len(column_chunks(widths(flat), first, console.width)) > 1:  # too wide: each interval under its value
        cells = [[c.replace(" [", "\n[", 1) for c in col] for col in flat]
    title: str | None = (
        f"Acceptance ({rep.confidence:.0%} CI: score interval, jackknife design effect; AL = 1 + accepted/drafts)"
    )
    for chunk in column_chunks(widths(cells), first, console.width):
        table = Table(title=title, title_justify="left")
        title = None
        table.add_column("", justify="left", no_wrap=True)
        for i in chunk:
            table.add_column(user_text(names[i]), justify="right")
        for j, name in enumerate(stats):
            table.add_row(name, *(cells[i][j] for i in chunk))
        console.print(table)

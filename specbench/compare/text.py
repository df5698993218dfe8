"""Text renderings of a :class:`~specbench.compare.cellwise.Comparison`: the Rich terminal table,
Markdown (PR comment / $GITHUB_STEP_SUMMARY) and the shared number formatting."""

from __future__ import annotations

import math
import re

from specbench.compare.cellwise import Comparison, MetricRow
from specbench.compare.verdicts import CellComparison, GateResult
from specbench.render import format as fmt
from specbench.render.format import md_cell, user_text
from specbench.render.tables import titles

VERDICT_STYLE = {"worse": "bold red", "better": "green", "~": "dim"}
VERDICT_MD = {"worse": "🔴 worse", "better": "🟢 better", "~": "~"}


def _digits(row: MetricRow) -> int:
    return 4 if row.metric.is_fraction else 3 if row.metric.unit == "tokens" else 2


def fmt_value(row: MetricRow, x: float | None) -> str:
    return fmt.num(x, _digits(row))


def fmt_delta(row: MetricRow, x: float | None, *, sign: bool = True) -> str:
    if row.metric.is_fraction:  # a difference of fractions reads best in percentage points
        return fmt.pp(x, sign=sign)
    return fmt.num(x, _digits(row), sign=sign)


def fmt_change(row: MetricRow) -> str:
    d = fmt_delta(row, row.delta)
    if row.rel is not None and not row.metric.is_fraction:
        d += f" ({row.rel * 100:+.1f}%)"
    return d


SCOPE_MARK = {"within-run only": " within-run", "between repeats": " over repeats"}


def fmt_ci(row: MetricRow) -> str:
    """The CI of the change; latency / throughput rows say what it covers (noise.py)."""
    mark = SCOPE_MARK.get(row.scope, "")
    if row.ci is None:
        return ("no CI (too few units)" if "too few" in row.why else "no CI") + mark
    return f"[{fmt_delta(row, row.ci[0])}, {fmt_delta(row, row.ci[1])}]{mark}"


def tally(comp: Comparison) -> str:
    n = comp.counts
    text = f"{n['pass']} passed"
    if n["cannot_fail"]:
        text += f", {n['cannot_fail']} cannot fail (tolerance reaches the metric's worst value)"
    text += f", {n['fail']} failed, {n['inconclusive']} inconclusive"
    within = sum(1 for g in comp.undecided if g.scope == "within-run only")
    straddle = len(comp.undecided) - within
    why = [f"{straddle} with an interval that straddles the tolerance"] if straddle else []
    why += [f"{within} within-run only: 2+ repeats a side decide"] if within else []
    return text + (f" ({'; '.join(why)})" if why else "")


def headline(comp: Comparison) -> str:
    fails, unsure = comp.failures, comp.inconclusive
    names = cell_titles(comp)  # the cells' display names, as in the table

    def checks(gates: list) -> str:
        shown = [f"{names.get(g.cell, g.cell)}: {short_metric(g.metric)}" for g in gates[:3]]
        return "; ".join(shown) + ("; ..." if len(gates) > 3 else "")

    if fails:
        what = checks(fails)
        cells = len({g.cell for g in fails})
        return f"REGRESSION: {len(fails)} gate check(s) failed in {cells} cell(s) ({what}); {tally(comp)}"
    if unsure:
        what = checks(unsure)
        return f"INCONCLUSIVE: {len(unsure)} gate check(s) could not be decided ({what}); {tally(comp)}"
    if not comp.checks:
        return "INCONCLUSIVE: no gate check ran"
    if not comp.counts["pass"]:
        return f"NOTHING TESTED: every check cannot fail; {tally(comp)}"
    return f"no regression: {tally(comp)}"


def _gate_cell(checks: list[GateResult], md: bool = False) -> str:
    status = cell_status(checks)
    if status == "fail":
        return "**FAIL**" if md else "[bold red]FAIL[/]"
    if status == "inconclusive" and not md:
        return "[yellow]inconclusive[/]"
    return status


def cell_status(checks: list[GateResult]) -> str:
    """One verdict for the checks of one metric in one cell: fail, inconclusive, pass, or
    "cannot fail" when every check passed only because nothing past its tolerance is possible."""
    statuses = [g.status for g in checks]
    if "fail" in statuses:
        return "fail"
    if "inconclusive" in statuses:
        return "inconclusive"
    if not statuses:
        return ""
    return "cannot fail" if all(g.cannot_fail for g in checks) else "pass"


def _mdc(cell) -> dict[str, str]:
    """Minimum detectable harm per metric row, from its gate checks (detected with 80% probability)."""
    out: dict[str, str] = {}
    for g in cell.gates:
        if g.mdc is not None:
            row = next((r for r in cell.rows if r.name == g.metric), None)
            out[g.metric] = fmt_delta(row, g.mdc, sign=False) if row else f"{g.mdc:.4g}"
    return out


SHORT = {"mean_acceptance_length": "AL", "draft_acceptance_rate": "DAR", "output_tok_per_s": "tok/s"}
DETECTS = (
    "the harm each gate check detects with 80% probability at the level the run-level correction holds "
    "it to (one-sided alpha/m, m decided checks): tolerance + (z_(1-alpha/m) + z_0.8) x SE, t-exact for t "
    "intervals, if the harm leaves the SE as measured"
)
# Below this many units (df + 1) a harm the gate can see changes the spread: the printed figure
# overpromises (benchmarks/gate_error_rates.py section 2: detected 49% at 5 prompts, 81% at 10).
FEW_UNITS = 10
FEW_UNITS_NOTE = (
    f"; with fewer than {FEW_UNITS} units a cell's figure is only a lower bound (in simulation a drop equal "
    "to it was caught about half the time at 5 prompts: docs/methods.md)"
)


def detects(comp: Comparison) -> str:
    """What "detects" means, and that it overpromises where some check rests on few units."""
    few = any(g.mdc is not None and g.df is not None and g.df + 1 < FEW_UNITS for g in comp.checks)
    return DETECTS + (FEW_UNITS_NOTE if few else "")


STATUS_STYLE = {"pass": "green", "fail": "bold red", "inconclusive": "yellow", "cannot fail": "dim"}


def short_metric(name: str) -> str:
    """``per_position[1]`` -> ``p_1``, ``conditional[1]`` -> ``α_1``, ``mean_acceptance_length`` -> ``AL``."""
    for long, sym in (("per_position[", "p_"), ("conditional[", "α_")):
        if name.startswith(long) and name.endswith("]"):
            return sym + name[len(long) : -1]
    return SHORT.get(name, name)


def cell_titles(comp: Comparison) -> dict[str, str]:
    """``{cell name: title}``: the axis values that vary, ``no spec`` for a baseline."""
    return titles([(c.name, {k: str(v) for k, v in c.axes.items()}, c.is_baseline, None) for c in comp.cells])


def _short_change(row: MetricRow | None) -> str:
    """The change a gate judged, in its own terms: pp for fractions, % for the rest."""
    if row is None or row.delta is None:
        return fmt.MISSING
    if row.metric.is_fraction:
        return fmt.pp(row.delta, 1)
    return fmt.num(row.rel * 100, 1, sign=True) + "%" if row.rel is not None else fmt_delta(row, row.delta)


def verdict_grid(comp: Comparison) -> tuple[list[str], list[tuple[str, list[tuple[str, str]]]], list[str]]:
    """Gated metrics (columns), one row per cell with a check or a missing side: ``(title,
    [(change, status), ...])``, and the titles of cells no gate looked at."""
    names = cell_titles(comp)
    metrics = list(dict.fromkeys(g.metric for c in comp.cells for g in c.gates))
    rows, ungated = [], []
    for cell in comp.cells:
        if not cell.gates:  # a cell on one side only is named in the notes below the table
            if not cell.missing:
                ungated.append(names[cell.name])
            continue
        row = []
        for m in metrics:
            status = cell_status([g for g in cell.gates if g.metric == m])
            metric_row = next((r for r in cell.rows if r.name == m), None)
            change = "missing" if cell.missing else _short_change(metric_row)
            row.append((change if status else "", status))
        rows.append((names[cell.name], row))
    return metrics, rows, ungated


def units_note(comp: Comparison) -> str:
    """What the intervals were computed over, when every compared cell agrees (``20 vs 20 request
    units``); else "units per cell: --verbose"."""
    kinds = {(c.base_units, c.cand_units, c.unit_kind) for c in comp.cells if not c.missing and c.gates}
    if len(kinds) != 1:
        return "units per cell: --verbose"
    b, c, kind = kinds.pop()
    return f"{b} vs {c} {kind or ''} units".replace("  ", " ")


def _print_verdicts(comp: Comparison, console) -> None:
    metrics, rows, ungated = verdict_grid(comp)
    if not rows:
        return
    table = _table(f"Gate checks per cell: change, verdict ({units_note(comp)})")
    table.add_column("cell")
    for m in metrics or ["check"]:
        table.add_column(short_metric(m), justify="right")
    for title, row in rows:
        table.add_row(
            user_text(title),
            *(
                f"{user_text(change)} [{STATUS_STYLE.get(st, '')}]{'FAIL' if st == 'fail' else st}[/]"
                if st
                else user_text(change)
                for change, st in row
            ),
        )
    console.print(table)
    if ungated:
        console.print(
            f"no gate applies to: {user_text(', '.join(ungated))}", highlight=False, soft_wrap=True, style="dim"
        )


def print_table(comp: Comparison, console, verbose: bool = False, err=None, quiet: bool = False) -> None:
    """A cells x gated-metrics verdict table, (``verbose``: every metric of every cell), then cells on
    one side only and warnings (on ``err``, stderr in the CLI), failures, undecided checks grouped
    by reason (``verbose``: one line each) and the headline; ``quiet``: the headline only."""
    if quiet:
        console.print(f"[{_style(comp)}]{user_text(headline(comp))}[/]", highlight=False, soft_wrap=True)
        return
    # CI logs are not terminals (80 columns by default); a truncated table is unreadable there.
    width = console.width
    if not console.is_terminal:
        console.width = max(width, 150)
    try:
        _print_table(comp, console, verbose, console if err is None else err)
    finally:
        console.width = width


def _print_table(comp: Comparison, console, verbose: bool, err) -> None:
    # the verdict first (a reader stops there) and last (a CI log's last line)
    console.print(f"[{_style(comp)}]{user_text(headline(comp))}[/]", highlight=False, soft_wrap=True)
    if verbose:
        _print_details(comp, console)
    _print_verdicts(comp, console)
    _print_notes(comp, console, err, verbose)


def undecided_lines(comp: Comparison) -> list[str]:
    """The inconclusive checks, one line per reason: checks of one gate whose interval straddles its
    tolerance share a line naming their cells and metrics and the units that would decide them; any
    other reason shared by several checks (the same message) likewise."""
    names = cell_titles(comp)
    groups: dict[tuple[str, str], list] = {}
    for g in comp.inconclusive:
        reason = "undecided" if g.undecided else g.message.removeprefix(f"{g.metric}: ")
        groups.setdefault((g.gate, reason), []).append(g)
    out = []
    for (gate, reason), members in groups.items():
        cells: dict[str, list[str]] = {}
        for g in members:
            cells.setdefault(names.get(g.cell, g.cell), []).append(short_metric(g.metric))
        where = "; ".join(f"{cell}: {', '.join(ms)}" for cell, ms in cells.items())
        if reason == "undecided":
            reason = _undecided_reason(gate, members)
        else:
            reason = f"({gate}) {reason}"
        out.append(f"{len(members)} check(s) {reason} — {where}")
    return out


def _undecided_reason(gate: str, members: list[GateResult]) -> str:
    needs = sorted(int(n) for g in members for n in re.findall(r"needs ~(\d+)", g.undecided))
    has = sorted({g.units for g in members if g.units})
    unit = members[0].unit or "units"
    has_text = ", ".join(map(str, has)) or "?"
    head = f"not known to be within {gate} (the interval straddles the tolerance)"
    if any(g.scope == "within-run only" for g in members):
        head = f"not known to be within {gate} (within-run only: 2+ repeats a side decide)"
    if needs:
        span = f"~{needs[0]}" if needs[0] == needs[-1] else f"~{needs[0]}–{needs[-1]}"
        return f"{head}: needs {span} {unit} to decide (has {has_text})"
    return f"{head} with {has_text} {unit}"


def _table(title: str):
    """A terminal table without side borders, one space of padding between columns (collapsed), so
    eight columns of figures fit 100 columns; a column too wide wraps at its spaces, never clips."""
    from rich import box
    from rich.table import Table

    return Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )


def _decimals(row: MetricRow, *xs: float | None) -> int:
    """Decimals for a terminal figure: four significant digits of the largest of ``xs`` (``1813``,
    ``148.3``, ``2.774``), never more than Markdown's (:func:`fmt_value`)."""
    top = max((abs(x) for x in xs if x is not None and math.isfinite(x)), default=0.0)
    return _digits(row) if top < 1 else min(_digits(row), max(0, 3 - int(math.floor(math.log10(top)))))


def _terse(row: MetricRow, x: float | None, *, sign: bool = False, like: tuple = ()) -> str:
    if row.metric.is_fraction:
        return fmt_delta(row, x, sign=sign) if sign else fmt_value(row, x)
    return fmt.num(x, _decimals(row, x, *like), sign=sign)


# The terminal's CI column marks what a latency / throughput interval covers (SCOPE_MARK's words in
# Markdown and JSON), explained once under the tables (KEY).
SCOPE_SIGN = {"within-run only": "†", "between repeats": "‡"}
KEY = (
    "~ not shown to change past its tolerance (worse / better: the whole CI is past it) · "
    "† CI within one run (1 repeat a side; a check fails only past the noise floor) · "
    "‡ CI over repeats (Welch t over one value per repeat) · "
    "detects: the smallest harm its check catches 80% of the time"
)


def _terse_change(row: MetricRow) -> str:
    d = _terse(row, row.delta, sign=True)
    if row.rel is not None and not row.metric.is_fraction:
        d += f" ({row.rel * 100:+.1f}%)"
    return d


def _terse_ci(row: MetricRow) -> str:
    mark = SCOPE_SIGN.get(row.scope, "")
    if row.ci is None:
        return ("no CI (too few units)" if "too few" in row.why else "no CI") + mark
    lo, hi = (_terse(row, x, sign=True, like=row.ci) for x in row.ci)
    return f"[{lo}, {hi}]{mark}"


def _print_details(comp: Comparison, console) -> None:
    level = int(round(comp.confidence * 100))
    names = cell_titles(comp)
    for cell in comp.cells:
        gate_by_metric: dict[str, list[GateResult]] = {}
        for g in cell.gates:
            gate_by_metric.setdefault(g.metric, []).append(g)
        units = (
            f"{cell.base_units} vs {cell.cand_units} {cell.unit_kind or ''} units"
            if cell.base_units and cell.cand_units
            else ("acceptance on one side only" if cell.base_units or cell.cand_units else "")
        )
        title = user_text(names[cell.name])
        if cell.missing:
            console.print(f"[yellow]{title}: no comparison: the cell {cell.missing}[/]", highlight=False)
            continue
        table = _table(f"{title}  [dim]({units})[/]" if units else title)
        for col in ("metric", "base", "cand", "change", f"{level}% CI", "verdict", "gate", "detects"):
            table.add_column(col, justify="left" if col in ("metric", "verdict", "gate") else "right")
        mdc = _mdc(cell)
        for row in cell.rows:
            table.add_row(
                short_metric(row.name),
                _terse(row, row.base, like=(row.cand,)),
                _terse(row, row.cand, like=(row.base,)),
                _terse_change(row),
                _terse_ci(row),
                f"[{VERDICT_STYLE[row.verdict]}]{row.verdict}[/]",
                _gate_cell(gate_by_metric.get(row.name, [])),
                mdc.get(row.name, ""),
            )
        console.print(table)
    console.print(KEY, style="dim", highlight=False)


def one_side_names(comp: Comparison) -> tuple[list[str], list[str]]:
    """The cells only in the baseline and only in the candidate, as the tables name them, with the
    directory id after a title that differs from it (``MLA off · norm on (mla-off__…__r0)``)."""
    names = cell_titles(comp)

    def named(n: str) -> str:
        title = names.get(n, n)
        return n if title == n else f"{title} ({n})"

    return [named(n) for n in comp.only_base], [named(n) for n in comp.only_cand]


def _print_notes(comp: Comparison, console, err, verbose: bool = False) -> None:
    u = user_text  # cell names, axis values, messages and warnings come from the inputs
    only_base, only_cand = one_side_names(comp)
    for name in only_base:
        err.print(f"[yellow]warning:[/] only in baseline: {u(name)}", highlight=False)
    for name in only_cand:
        err.print(f"[yellow]warning:[/] only in candidate: {u(name)}", highlight=False)
    for line in comp.mismatches:
        err.print(f"[yellow]warning:[/] runs differ: {u(line)}", highlight=False, soft_wrap=True)
    for line in comp.warnings:
        err.print(f"[yellow]warning:[/] {u(line)}", highlight=False, soft_wrap=True)
    if verbose:  # the grouped lines below say the same per gate
        for g in comp.inconclusive:
            console.print(
                f"[yellow]INCONCLUSIVE[/] {u(g.cell)}: {u(g.metric)} ({u(g.gate)}): {u(g.message)}",
                highlight=False,
                soft_wrap=True,
            )
    else:
        for line in undecided_lines(comp):
            console.print(f"[yellow]INCONCLUSIVE[/] {u(line)}", highlight=False, soft_wrap=True)
        more = "every metric of every cell" + (" and each undecided check" if comp.inconclusive else "")
        console.print(f"{more}, with CIs: --verbose (or --markdown / --json)", style="dim", highlight=False)
    for g in comp.failures:
        console.print(
            f"[bold red]FAIL[/] {u(g.cell)}: {u(g.metric)} ({u(g.gate)}): {u(g.message)}",
            highlight=False,
            soft_wrap=True,
        )
    gates = ", ".join(comp.gates) + (" (default)" if comp.default_gates else "")
    console.print(f"gates: {u(gates)}; {u(comp.error_rate)}", highlight=False, soft_wrap=True)
    if verbose:
        console.print(f"detects: {u(detects(comp))}", highlight=False, style="dim")
    console.print(f"[{_style(comp)}]{u(headline(comp))}[/]", highlight=False, soft_wrap=True)


def _style(comp: Comparison) -> str:
    return "bold red" if comp.failures else ("bold yellow" if comp.inconclusive else "bold green")


def markdown(comp: Comparison) -> str:
    """A self-contained Markdown report: headline, one table per cell, regressions, warnings."""
    level = int(round(comp.confidence * 100))
    out = _md_head(comp, level)
    out += _md_verdict_grid(comp)
    out += ["<details><summary>Every metric of every cell</summary>", ""]
    names = cell_titles(comp)
    for cell in comp.cells:
        out += _md_cell_table(cell, names[cell.name], level)
    out += ["</details>", ""]
    out += _md_gate_list("Regressions", comp.failures)
    out += _md_gate_list("Inconclusive (not a pass)", comp.inconclusive)
    out += _md_notes(comp)
    return "\n".join(out)


def _md_head(comp: Comparison, level: int) -> list[str]:
    m = md_cell  # every value from the inputs stays on its line and in its cell (no "|", newline or ESC)
    icon = "❌" if comp.failures else ("⚠️" if comp.inconclusive or not comp.checks else "✅")
    return [
        f"## {icon} specbench compare: {m(headline(comp))}",
        "",
        f"Baseline `{m(comp.base_label)}` vs candidate `{m(comp.cand_label)}`; gates: "
        + ", ".join(f"`{m(g)}`" for g in comp.gates)
        + (" (default)" if comp.default_gates else "")
        + f"; {level}% CIs; {m(comp.error_rate)}. *detects*: {m(detects(comp))}.",
        "",
    ]


def _md_verdict_grid(comp: Comparison) -> list[str]:
    m = md_cell
    metrics, rows, ungated = verdict_grid(comp)
    if not rows:
        return []
    md_status = {
        "fail": "**FAIL**",
        "pass": "pass",
        "inconclusive": "inconclusive",
        "cannot fail": "cannot fail",
        "": "",
    }
    out = [
        f"Gate checks per cell: change, verdict ({units_note(comp)}).",
        "",
        "| cell | " + " | ".join(short_metric(metric) for metric in metrics) + " |",
        "|---|" + "---:|" * len(metrics),
    ]
    out += [
        f"| {m(title)} | " + " | ".join(f"{m(c)} {md_status[st]}".strip() for c, st in row) + " |"
        for title, row in rows
    ] + [""]
    if ungated:
        out += [f"No gate applies to: {m(', '.join(ungated))}.", ""]
    return out


def _md_cell_table(cell: CellComparison, title: str, level: int) -> list[str]:
    if cell.missing:
        return [f"### {md_cell(title)}", "", f"No comparison: the cell {md_cell(cell.missing)}.", ""]
    gate_by_metric: dict[str, list[GateResult]] = {}
    for g in cell.gates:
        gate_by_metric.setdefault(g.metric, []).append(g)
    out = [
        f"### {md_cell(title)}",
        "",
        f"| metric | base | cand | delta | {level}% CI | verdict | gate | detects |",
        "|---|---:|---:|---:|---:|---|---|---:|",
    ]
    mdc = _mdc(cell)
    for row in cell.rows:
        out.append(
            f"| {short_metric(row.name)} | {fmt_value(row, row.base)} | {fmt_value(row, row.cand)} | "
            f"{fmt_change(row)} | {fmt_ci(row)} | {VERDICT_MD[row.verdict]} | "
            f"{_gate_cell(gate_by_metric.get(row.name, []), md=True)} | {mdc.get(row.name, '')} |"
        )
    out.append("")
    return out


def _md_gate_list(heading: str, gates: list[GateResult]) -> list[str]:
    if not gates:
        return []
    m = md_cell
    return (
        [f"### {heading}", ""]
        + [f"- **{m(g.cell)}** `{m(g.metric)}` (`{m(g.gate)}`): {m(g.message)}" for g in gates]
        + [""]
    )


def _md_notes(comp: Comparison) -> list[str]:
    m = md_cell
    only_base, only_cand = one_side_names(comp)
    notes = (
        [f"- only in baseline: {m(n)}" for n in only_base]
        + [f"- only in candidate: {m(n)}" for n in only_cand]
        + [f"- runs differ: {m(x)}" for x in comp.mismatches]
        + [f"- warning: {m(w)}" for w in comp.warnings]
    )
    if not notes:
        return []
    return ["### Notes", ""] + notes + [""]

"""What a finished run prints: its cells' table (AL [CI], p_i, tok/s, speed-up [CI]) and one line per
question the matrix asks, read back from the run directory. Rendered by the run's display
(run/display.py) through the callable the CLI hands it: it reads reports, so it lives here, above run."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from specbench.analysis.intervals import cell_intervals
from specbench.analysis.speedup import RERUN_SD, Speedup
from specbench.analysis.where_it_pays import where_it_pays
from specbench.errors import SpecbenchError
from specbench.records.files import acceptance_units
from specbench.render import format as fmt
from specbench.report.assemble import contrasts, titles_of
from specbench.report.baseline_pairs import StudyAnalysis, run_speedups
from specbench.report.throughput import headline
from specbench.results.read import read_run
from specbench.results.store import CellData


def _fmt(x: Any, digits: int = 3) -> str:
    return fmt.num(x, digits)


def final_table(run_dir: Path, study: StudyAnalysis | None = None) -> Table:
    """Per cell: AL [95% CI], p_i, output tok/s and the speed-up over its own baseline [95% CI], read
    back from the run directory itself; cells titled as `report` and `compare` title them
    (``MLA on · norm off``, ``no spec · MLA on``). The AL interval is recomputed from the stored
    counts over the units `report` and `compare` choose (records.files.acceptance_units), so all three
    print one interval, also for runs stored under an older interval method. ``study``: the run's
    speed-ups already read (:func:`specbench.report.baseline_pairs.run_speedups`), else read here."""
    run = read_run(run_dir)
    names = titles_of(run)
    study = study if study is not None else _study(run_dir)
    speed = {s.cell: s for s in study.speedups} if study is not None else {}
    failed = any(c.status != "done" for c in run.cells.values())
    k = max((len(c.acc.derived.per_position) for c in run.cells.values() if c.acc is not None), default=0)
    t = _empty_table(run.run_id, study, failed, k)
    for cid, c in run.cells.items():
        t.add_row(*_cell_row(Path(run_dir) / cid, c, names.get(cid, cid), speed.get(cid), failed, k))
    return t


def _empty_table(title: str, study: StudyAnalysis | None, failed: bool, k: int) -> Table:
    t = Table(
        title=title,
        caption="AL includes the bonus token; p_i unconditional; 95% CIs; "
        "tok/s: the load's output throughput (output tokens / load time, as cells.csv and compare "
        "show it); speed-up over the cell's own no-spec baseline (< 1x slower), its CI "
        + _speedup_ci_words(study.speedups if study is not None else []),
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
    )
    # numbers never wrap; a long cell name wraps at its spaces, inside its own row
    t.add_column("cell", min_width=11)
    if failed:
        t.add_column("status", min_width=6)
    t.add_column("AL [CI]", no_wrap=True)
    for i in range(k):
        t.add_column(f"p{i}", no_wrap=True)
    t.add_column("tok/s", no_wrap=True)
    t.add_column("speed-up [CI]", no_wrap=True)
    return t


def _cell_row(cell_dir: Path, c: CellData, name: str, s: Speedup | None, failed: bool, k: int) -> list[str]:
    tps = (c.summary or {}).get("results_mean_output_throughput_token_per_s")
    status = [c.status if c.status == "done" else f"{c.status}: {(c.record.reason or '')[:60]}".rstrip(": ")]
    status = status if failed else []
    if c.acc is None or c.acc.baseline:
        return [name, *status, *(["-"] * (1 + k)), _fmt(tps, 1), "-"]
    derived = c.acc.derived
    pos = derived.per_position
    up = (
        "-"
        if s is None
        else f"{fmt.num(s.point['output_tok_per_s'], 2)}× [{fmt.num(s.intervals['output_tok_per_s'][0], 2)}, "
        f"{fmt.num(s.intervals['output_tok_per_s'][1], 2)}]"
    )
    # the interval report and compare print (the stored one may be of an older method)
    units, _, _ = acceptance_units(c.acc, cell_dir / "acceptance.json")
    interval = cell_intervals(units).get("mean_acceptance_length") if len(units) > 1 else None
    return [
        name,
        *status,
        _with_ci(derived.mean_acceptance_length, interval, 2),
        *[_fmt(pos[i] if i < len(pos) else None) for i in range(k)],
        _fmt(tps, 1),
        up,
    ]


def _speedup_ci_words(found: list) -> str:
    """The speed-up column's caption: how its intervals were made, in a few words."""
    words = []
    if any(s.interleaved for s in found):
        words.append("over block pairs sent in turn to it and its baseline (load.interleave)")
    if not found or not all(s.interleaved for s in found):
        words.append(f"widened by the between-run spread of reruns ({RERUN_SD:g} on the log)")
    return "; ".join(words)


def _study(run_dir: Path) -> StudyAnalysis | None:
    """Each cell's speed-up over its own baseline and the throughput contrasts (None without requests)."""
    try:
        return run_speedups(run_dir)
    except (SpecbenchError, OSError, ValueError):
        return None


def report_command(run_dir: Path) -> str:
    """The `specbench report` command the final screen suggests, as it can be run: its --out lies
    outside the run (an output inside an input is refused) and outside the run's parent, which a
    `compare base out/*` would otherwise read as a run."""
    return shlex.join(["specbench", "report", str(run_dir), "--out", str(Path("report") / Path(run_dir).name)])


def final_screen(run_dir: Path):
    """What a finished run prints: the table, then one line per question the matrix asks (each
    contrast of two cells that differ in one axis, largest significant AL change first, with the
    attested confounds), then where the report is."""
    study = _study(run_dir)  # read once: the table's speed-ups and the lines below
    lines: list[Table | Text] = [final_table(run_dir, study)]
    pays = where_it_pays(study.speedups, study.cell_axes) if study is not None else None
    if pays:  # the answer to "does speculation pay here", before the contrasts
        lines.append(Text(pays))
    found = contrasts(run_dir)
    if found:
        lines.append(Text("What the matrix asks (Δ = first minus second, 95% CI: t, floored jackknife SE, unpaired):"))
        lines += [Text(f"- {c.line()}") for c in found]
    slower = [s for s in (study.speedups if study is not None else []) if s.point["output_tok_per_s"] < 1]
    if slower:  # why a speed-up below 1 happens, once, with this run's own step costs
        costs = [s.point["cost_ratio"] for s in slower]
        lines.append(
            Text(
                f"Speed-up below 1x in {len(slower)} cell(s): slower than serving without speculation. A verify "
                f"step cost {fmt.span(costs)} plain decode steps here, more than "
                "the tokens each step yields (AL): speed-up ≈ AL / step cost."
            )
        )
    through = headline(study.throughputs) if study is not None else []
    if through:
        lines.append(Text("Throughput (output tok/s, first value over second; CI widened by the between-run spread):"))
        lines += [Text(f"- {t.line()}") for t in through]
    # as every user-given path is shown: a credential in the run's path hidden, control characters visible
    lines.append(
        Text(
            f"Report, plots and divergence: {fmt.shown_text(report_command(run_dir))}", no_wrap=True, overflow="ignore"
        )
    )
    return Group(*lines)


def _with_ci(x, ci, digits: int) -> str:
    return fmt.with_ci(x, ci, digits)

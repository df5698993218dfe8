"""Progress of a run: a Rich Live table on a terminal, plain lines otherwise, nothing with --quiet.

One row per cell (pending / starting / warmup / load n/N / collecting / done / failed) with AL and
p0 as they arrive; at the end a table of AL and p_i with their CIs per cell.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from specbench.render import format as fmt


def _fmt(x: Any, digits: int = 3) -> str:
    return fmt.num(x, digits)


def _state_text(state: str, info: dict[str, Any]) -> str:
    if state == "load":
        return f"load {info.get('done', 0)}/{info.get('total', '?')}"
    if state == "failed" and info.get("reason"):
        return f"[red]failed[/]: {str(info['reason'])[:60]}"
    return {"done": "[green]done[/]"}.get(state, state)


class QuietDisplay:
    """Prints nothing (errors go to stderr through the CLI; the run dir is printed by the command)."""

    def start(self, cells) -> None: ...
    def update(self, cell_id: str, state: str, **info: Any) -> None: ...
    def finish(self, run_dir: Path, records: list) -> None: ...
    def close(self) -> None: ...


class PlainDisplay:
    """One line per state change, for logs and CI (no terminal control codes)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self._last: dict[str, str] = {}

    def start(self, cells) -> None:
        print(f"specbench: {len(cells)} cells", file=self.stream, flush=True)

    def update(self, cell_id: str, state: str, **info: Any) -> None:
        if state == "load" and info.get("done") not in (0, info.get("total")):
            return  # keep plain logs short: start and end of the load only
        text = _state_text(state, info).replace("[red]", "").replace("[green]", "").replace("[/]", "")
        if info.get("al") is not None:
            text += f"  AL {_fmt(info['al'], 2)}  p0 {_fmt(info.get('p0'))}"
        if self._last.get(cell_id) != text:
            self._last[cell_id] = text
            print(f"  {cell_id}: {text}", file=self.stream, flush=True)

    def finish(self, run_dir: Path, records: list) -> None:
        Console(file=self.stream, force_terminal=False, no_color=True, width=160).print(final_table(run_dir))

    def close(self) -> None: ...


class LiveDisplay:
    """Rich Live table on a terminal."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.rows: dict[str, dict[str, Any]] = {}
        self.live: Live | None = None

    def _table(self) -> Table:
        t = Table(title="specbench run", expand=False)
        for col in ("cell", "state", "AL", "p0"):
            t.add_column(col)
        for cid, row in self.rows.items():
            t.add_row(cid, _state_text(row["state"], row), _fmt(row.get("al"), 2), _fmt(row.get("p0")))
        return t

    def start(self, cells) -> None:
        self.rows = {c.cell_id: {"state": "pending"} for c in cells}
        self.live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def update(self, cell_id: str, state: str, **info: Any) -> None:
        row = self.rows.setdefault(cell_id, {})
        row.update({k: v for k, v in info.items() if v is not None}, state=state)
        if self.live is not None:
            self.live.update(self._table())

    def finish(self, run_dir: Path, records: list) -> None:
        self.close()
        self.console.print(final_table(run_dir))

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def final_table(run_dir: Path) -> Table:
    """AL, DAR and p_i with 95% CIs per cell, read back from the run directory itself; cells
    titled as `report` and `compare` title them (``MLA on · norm off``, ``no spec · MLA on``)."""
    from specbench.report.build import titles_of
    from specbench.run.store import load_run

    run = load_run(run_dir)
    names = titles_of(run)
    t = Table(title=f"{run.run_id}: acceptance (AL includes the bonus token; p_i unconditional)")
    t.add_column("cell")
    t.add_column("status")
    t.add_column("units")
    t.add_column("AL [95% CI]")
    t.add_column("DAR")
    k = max((len(c.acc.derived.per_position) for c in run.cells.values() if c.acc is not None), default=0)
    for i in range(k):
        t.add_column(f"p{i} [95% CI]")
    for cid, c in run.cells.items():
        name = names.get(cid, cid)
        if c.acc is None or c.acc.baseline:
            t.add_row(name, c.status, *(["-"] * (3 + k)))
            continue
        derived, ci = c.acc.derived, c.acc.ci
        units = f"{ci.n_units} {ci.unit}s" if ci is not None and ci.n_units is not None else "-"
        pos = derived.per_position
        interval = (lambda name: ci.interval(name)) if ci is not None else (lambda name: None)
        cols = [_with_ci(derived.mean_acceptance_length, interval("mean_acceptance_length"), 2),
                _fmt(derived.draft_acceptance_rate)]
        cols += [_with_ci(pos[i] if i < len(pos) else None, interval(f"p{i}"), 3) for i in range(k)]
        t.add_row(name, c.status, units, *cols)
    return t


def _with_ci(x, ci, digits: int) -> str:
    return fmt.with_ci(x, ci, digits)


def make_display(quiet: bool, tty: bool | None = None):
    if quiet:
        return QuietDisplay()
    if tty is None:
        tty = sys.stderr.isatty()
    return LiveDisplay() if tty else PlainDisplay()

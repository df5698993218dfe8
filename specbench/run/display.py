"""Progress of a run: a Rich Live table on a terminal, plain lines otherwise, nothing with --quiet.

One row per cell (pending / starting / warmup / load n/N / collecting / done / failed) with AL and
p0 as they arrive; at the end what the study found: per cell AL [CI], p_i, tok/s and speed-up over
its own baseline [CI], then one line per contrast the matrix asks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.live import Live
from rich.table import Table

from specbench.render import format as fmt
from specbench.render.format import user_text


def _fmt(x: Any, digits: int = 3) -> str:
    return fmt.num(x, digits)


def _state_text(state: str, info: dict[str, Any]) -> str:
    if state == "load":
        return f"load {info.get('done', 0)}/{info.get('total', '?')}"
    if state == "failed" and info.get("reason"):
        return f"[red]failed[/]: {user_text(str(info['reason'])[:60])}"
    return {"done": "[green]done[/]"}.get(state, state)


class QuietDisplay:
    """Prints nothing (errors go to stderr through the CLI; the run dir is printed by the command)."""

    def start(self, cells) -> None: ...
    def update(self, cell_id: str, state: str, **info: Any) -> None: ...
    def finish(self, run_dir: Path, records: list) -> None: ...
    def close(self) -> None: ...


class PlainDisplay:
    """One line per state change, for logs and CI (no terminal control codes): each line starts with
    the run's elapsed time, and a load says where it is at each quarter with the cell's ETA, so a CI
    log is never silent for a whole cell."""

    def __init__(
        self, stream=None, final: Callable[[Path], Any] | None = None, clock: Callable[[], float] = time.monotonic
    ):
        self.stream = stream or sys.stderr
        self.final = final
        self.clock = clock
        self.started = clock()
        self._last: dict[str, str] = {}
        self._load_start: dict[str, float] = {}
        self._quarter: dict[str, int] = {}

    def _print(self, text: str) -> None:
        print(f"[{_clock(self.clock() - self.started)}] {text}", file=self.stream, flush=True)

    def start(self, cells) -> None:
        self.started = self.clock()
        self._print(f"specbench: {len(cells)} cells")

    def update(self, cell_id: str, state: str, **info: Any) -> None:
        done, total = info.get("done"), info.get("total")
        if state == "load" and done not in (0, total):
            if not (isinstance(done, int) and isinstance(total, int) and total > 0):
                return
            quarter = 4 * done // total  # keep plain logs short: start, each quarter, end
            if quarter <= self._quarter.get(cell_id, 0):
                return
            self._quarter[cell_id] = quarter
            spent = self.clock() - self._load_start.get(cell_id, self.clock())
            eta = spent * (total - done) / done
            self._print(f"  {cell_id}: load {done}/{total}, {_clock(spent)} in, ~{_clock(eta)} to go")
            return
        if state == "load" and done == 0:
            self._load_start[cell_id] = self.clock()
            self._quarter[cell_id] = 0
        from rich.text import Text  # lazy: plain logs only

        text = Text.from_markup(_state_text(state, info)).plain  # the markup's text, escapes undone
        if info.get("al") is not None:
            text += f"  AL {_fmt(info['al'], 2)}  p0 {_fmt(info.get('p0'))}"
        if self._last.get(cell_id) != text:
            self._last[cell_id] = text
            self._print(f"  {cell_id}: {text}")

    def finish(self, run_dir: Path, records: list) -> None:
        if self.final is not None:
            Console(file=self.stream, force_terminal=False, no_color=True, width=120).print(
                self.final(run_dir), crop=False
            )

    def close(self) -> None: ...


class LiveDisplay:
    """Rich Live table on a terminal: each cell's state with how long it has been in it, and the
    run's elapsed time with an estimate of what is left (mean time of the finished cells)."""

    def __init__(
        self, console: Console | None = None, clock=time.monotonic, final: Callable[[Path], Any] | None = None
    ):
        self.console = console or Console(stderr=True)
        self.final = final
        self.rows: dict[str, dict[str, Any]] = {}
        self.live: Live | None = None
        self.clock = clock
        self.started = clock()

    def _table(self) -> Table:
        now = self.clock()
        done = [r for r in self.rows.values() if r["state"] in ("done", "failed") and r.get("took") is not None]
        left = sum(1 for r in self.rows.values() if r["state"] not in ("done", "failed"))
        eta = f", ~{_clock(left * sum(r['took'] for r in done) / len(done))} left" if done and left else ""
        t = Table(title=f"specbench run  {_clock(now - self.started)}{eta}", expand=False)
        for col in ("cell", "state", "AL", "p0"):
            t.add_column(col)
        for cid, row in self.rows.items():
            state = _state_text(row["state"], row)
            if row["state"] not in ("pending", "done", "failed") and row.get("since") is not None:
                state += f" {_clock(now - row['since'])}"
            t.add_row(cid, state, _fmt(row.get("al"), 2), _fmt(row.get("p0")))
        return t

    def __rich__(self) -> Table:  # Live re-renders this every refresh: the clocks tick between updates
        return self._table()

    def start(self, cells) -> None:
        self.started = self.clock()
        self.rows = {c.cell_id: {"state": "pending"} for c in cells}
        self.live = Live(self, console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def update(self, cell_id: str, state: str, **info: Any) -> None:
        row = self.rows.setdefault(cell_id, {"state": "pending"})
        now = self.clock()
        if state != row.get("state") and not (state == "load" and row.get("state") == "load"):
            row["since"] = now
        if state != "pending":
            row.setdefault("first", now)
        if state in ("done", "failed") and row.get("first") is not None and row.get("took") is None:
            row["took"] = now - row["first"]
        row.update({k: v for k, v in info.items() if v is not None}, state=state)
        if self.live is not None:
            self.live.refresh()

    def finish(self, run_dir: Path, records: list) -> None:
        self.close()
        if self.final is not None:
            self.console.print(self.final(run_dir), crop=False)  # the report command is one line

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _clock(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def make_display(quiet: bool, tty: bool | None = None, final: Callable[[Path], Any] | None = None):
    """The run's display; ``final(run_dir)`` renders what a finished run prints (the CLI passes
    report.screen.final_screen: the report layer sits above run)."""
    if quiet:
        return QuietDisplay()
    if tty is None:
        tty = sys.stderr.isatty()
    return LiveDisplay(final=final) if tty else PlainDisplay(final=final)

"""Progress of a run: a Rich Live table on a terminal, plain lines otherwise, nothing with --quiet.

One row per cell (pending / starting / warmup / load n/N / collecting / done / failed) with AL and
p0 as they arrive; at the end what the study found: per cell AL [CI], p_i, tok/s and speed-up over
its own baseline [CI], then one line per contrast the matrix asks.
"""

from __future__ import annotations

import sys
import time
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
        Console(file=self.stream, force_terminal=False, no_color=True, width=120).print(final_screen(run_dir))

    def close(self) -> None: ...


class LiveDisplay:
    """Rich Live table on a terminal: each cell's state with how long it has been in it, and the
    run's elapsed time with an estimate of what is left (mean time of the finished cells)."""

    def __init__(self, console: Console | None = None, clock=time.monotonic):
        self.console = console or Console(stderr=True)
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
        self.console.print(final_screen(run_dir))

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _clock(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def final_table(run_dir: Path) -> Table:
    """Per cell: AL [95% CI], p_i, output tok/s and the speed-up over its own baseline [95% CI], read
    back from the run directory itself; cells titled as `report` and `compare` title them
    (``MLA on · norm off``, ``no spec · MLA on``)."""
    from specbench.report.build import titles_of
    from specbench.run.read import read_run

    run = read_run(run_dir)
    names = titles_of(run)
    speed = _speedups(run_dir)
    from rich import box

    t = Table(title=run.run_id, caption="AL includes the bonus token; p_i unconditional; 95% CIs; "
              "tok/s per request; speed-up over the cell's own no-spec baseline", box=box.SIMPLE_HEAD,
              padding=(0, 1), pad_edge=False, collapse_padding=True)
    # numbers never wrap; a long cell name wraps at its spaces, inside its own row
    t.add_column("cell", min_width=11)
    failed = any(c.status != "done" for c in run.cells.values())
    if failed:
        t.add_column("status", min_width=6)
    t.add_column("AL [CI]", no_wrap=True)
    k = max((len(c.acc.derived.per_position) for c in run.cells.values() if c.acc is not None), default=0)
    for i in range(k):
        t.add_column(f"p{i}", no_wrap=True)
    t.add_column("tok/s", no_wrap=True)
    t.add_column("speed-up [CI]", no_wrap=True)
    base_tps = {s.baseline: s.base.get("output_tok_per_s") for s in speed.values()}
    for cid, c in run.cells.items():
        name = names.get(cid, cid)
        status = [c.status if c.status == "done" else f"{c.status}: {(c.record.reason or '')[:60]}".rstrip(": ")]
        status = status if failed else []
        if c.acc is None or c.acc.baseline:
            t.add_row(name, *status, *(["-"] * (1 + k)), _fmt(base_tps.get(cid), 1), "-")
            continue
        derived, ci = c.acc.derived, c.acc.ci
        pos = derived.per_position
        s = speed.get(cid)
        up = "-" if s is None else f"{fmt.num(s.point['output_tok_per_s'], 2)}× [{fmt.num(s.intervals['output_tok_per_s'][0], 2)}, " \
                                   f"{fmt.num(s.intervals['output_tok_per_s'][1], 2)}]"
        interval = ci.interval("mean_acceptance_length") if ci is not None else None
        t.add_row(name, *status, _with_ci(derived.mean_acceptance_length, interval, 2),
                  *[_fmt(pos[i] if i < len(pos) else None) for i in range(k)],
                  _fmt(None if s is None else s.spec.get("output_tok_per_s"), 1), up)
    return t


def _speedups(run_dir: Path) -> dict:
    """cell id -> its speed-up over its own baseline (none without requests or a baseline)."""
    from specbench.errors import SpecbenchError
    from specbench.report.study import run_speedups

    try:
        return {s.cell: s for s in run_speedups(run_dir, n_resamples=1000).speedups}
    except (SpecbenchError, OSError, ValueError):
        return {}


def final_screen(run_dir: Path):
    """What a finished run prints: the table, then one line per question the matrix asks (each
    contrast of two cells that differ in one axis, largest significant AL change first, with the
    attested confounds), then where the report is."""
    from rich.console import Group
    from rich.text import Text

    from specbench.report.build import contrasts

    lines = [final_table(run_dir)]
    found = contrasts(run_dir)
    if found:
        lines.append(Text("What the matrix asks (Δ = first minus second, 95% CI: t, jackknife SE, unpaired):"))
        lines += [Text(f"- {c.line()}") for c in found]
    lines.append(Text(f"Report, plots and divergence: specbench report {run_dir} --out {run_dir}/report"))
    return Group(*lines)


def _with_ci(x, ci, digits: int) -> str:
    return fmt.with_ci(x, ci, digits)


def make_display(quiet: bool, tty: bool | None = None):
    if quiet:
        return QuietDisplay()
    if tty is None:
        tty = sys.stderr.isatty()
    return LiveDisplay() if tty else PlainDisplay()

"""specbench/run/display.py: plain lines off a terminal, a live table on one, the final table."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from specbench.analysis.intervals import cell_intervals
from specbench.records.counts import Counts
from specbench.render import format as fmt
from specbench.report.screen import final_screen, final_table
from specbench.results import store
from specbench.run.cells import Cell
from specbench.run.display import LiveDisplay, PlainDisplay, QuietDisplay, make_display

UNITS = [
    {"num_drafts": 25, "draft_tokens": 75, "accepted_tokens": a, "accepted_per_position": pos}
    for a, pos in ((30, [15, 10, 5]), (40, [20, 12, 8]), (40, [20, 13, 7]), (40, [20, 15, 5]))
]


def _run(tmp_path):
    run_dir = tmp_path / "run"
    store.write_manifest(
        run_dir, {"run_id": "r1", "axes": ["mla"], "cells": ["mla-on__r0", "mla-off__r0", "baseline__mla-on__r0"]}
    )
    acc = {
        "prometheus": {"counts": {"num_drafts": 100, "draft_tokens": 300, "accepted_tokens": 150}},
        "derived": {"mean_acceptance_length": 2.5, "draft_acceptance_rate": 0.5, "per_position": [0.75, 0.5, 0.25]},
        # stored by an older interval method: the screen recomputes from the units, as report does
        "ci": {
            "unit": "request",
            "n_units": 4,
            "intervals": {"mean_acceptance_length": [2.25, 2.75], "p0": [0.7, 0.8]},
        },
        "per_request": {"units": [dict(u) for u in UNITS]},
    }
    store.write_cell(run_dir, {"cell_id": "mla-on__r0", "axes": {"mla": "on"}, "status": "done"}, acc)
    store.write_cell(run_dir, {"cell_id": "mla-off__r0", "axes": {"mla": "off"}, "status": "failed"}, None)
    store.write_cell(
        run_dir, {"cell_id": "baseline__mla-on__r0", "axes": {"mla": "on"}, "is_baseline": True, "status": "done"}, None
    )
    return run_dir


def _render(table) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200, no_color=True).print(table)
    return buf.getvalue()


def test_final_table_shows_al_and_p_with_cis(tmp_path):
    text = _render(final_table(_run(tmp_path)))
    rows = {
        line.split("  ")[0].strip(): line for line in text.splitlines() if line.strip().startswith(("MLA", "no spec"))
    }
    # titled as report/compare title cells, not by directory name
    assert set(rows) == {"MLA on", "MLA off", "no spec · MLA on"}, rows
    units = [Counts(num_spec_tokens=3, **u) for u in UNITS]
    al = fmt.with_ci(2.5, cell_intervals(units)["mean_acceptance_length"], 2)
    assert f" {al} " in rows["MLA on"] and "[2.25, 2.75]" not in rows["MLA on"], (al, rows["MLA on"])
    assert "0.750" in rows["MLA on"] and "0.250" in rows["MLA on"]
    assert "failed" in rows["MLA off"]  # a status column only when a cell did not finish


def test_final_screen_answers_the_study_in_40_lines_and_fits_80_columns():
    """The committed default study: per cell AL [CI], p_i, tok/s, speed-up [CI] over its own
    baseline; one line per contrast, significant ones first; where the report is."""
    from pathlib import Path

    run = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
    wide, narrow = _render_at(final_screen(run), 120), _render_at(final_screen(run), 80)
    lines = wide.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 120
    assert max(map(len, narrow.splitlines())) <= 80
    on = next(ln for ln in lines if ln.strip().startswith("MLA on · norm on "))
    assert re.search(r"2\.72 \[\d\.\d\d, \d\.\d\d\]", on) and re.search(r"\d\.\d\d× \[\d\.\d\d, \d\.\d\d\]", on)
    questions = [ln for ln in lines if ln.startswith("- ") and ": AL " in ln]
    assert len(questions) == 9 and questions[0].startswith("- norm off vs on")
    # MLA's own throughput effect, between the two no-spec cells, under the acceptance contrasts
    assert any(ln.startswith("- MLA off vs on (no spec): output tok/s ") for ln in lines)
    # every speculative cell of this CPU run is slower than no speculation: said once, with why
    assert " ".join(wide.split()).count("Speed-up below 1x in 6 cell(s): slower than serving without speculation") == 1
    assert all(", significant" in q for q in questions[:6]) and "not attested" not in wide
    assert all("also differs in chunked_prefill on vs off" in " ".join(wide.split()) for q in questions if "MLA" in q)
    assert "specbench report" in lines[-1] or "specbench report" in lines[-2]


def _render_at(renderable, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True).print(renderable)
    return buf.getvalue()


def test_plain_display_prints_state_changes_once(tmp_path):
    """A CI log: every line with the run's elapsed time, a load at start, each quarter (with the
    cell's ETA from its own pace) and end; the clock is a counter, 10 s per request."""
    out = io.StringIO()
    now = [0.0]
    d = PlainDisplay(stream=out, clock=lambda: now[0])
    cells = [Cell("mla-on__r0", {"mla": "on"}, 0, False)]
    d.start(cells)
    now[0] = 45.0  # start-up
    d.update("mla-on__r0", "starting")
    d.update("mla-on__r0", "starting")
    for k in range(0, 21):
        d.update("mla-on__r0", "load", done=k, total=20)
        now[0] += 10
    d.update("mla-on__r0", "done", al=2.5, p0=0.75)
    d.update("mla-on__r0", "failed", reason="server died")
    lines = out.getvalue().splitlines()
    assert lines[0] == "[0:00] specbench: 1 cells"
    assert lines[1:] == [
        "[0:45]   mla-on__r0: starting",
        "[0:45]   mla-on__r0: load 0/20",
        "[1:35]   mla-on__r0: load 5/20, 0:50 in, ~2:30 to go",
        "[2:25]   mla-on__r0: load 10/20, 1:40 in, ~1:40 to go",
        "[3:15]   mla-on__r0: load 15/20, 2:30 in, ~0:50 to go",
        "[4:05]   mla-on__r0: load 20/20",
        "[4:15]   mla-on__r0: done  AL 2.50  p0 0.750",
        "[4:15]   mla-on__r0: failed: server died",
    ]
    assert "\x1b[" not in out.getvalue()


def test_live_display_and_choice():
    buf = io.StringIO()
    d = LiveDisplay(Console(file=buf, width=120, force_terminal=True))
    d.start([Cell("a__r0", {}, 0, False)])
    d.update("a__r0", "load", done=3, total=20)
    d.update("a__r0", "done", al=2.0, p0=0.6)
    d.close()
    assert "a__r0" in buf.getvalue() and "0.600" in buf.getvalue()
    assert isinstance(make_display(quiet=True), QuietDisplay)
    assert isinstance(make_display(quiet=False, tty=False), PlainDisplay)
    assert isinstance(make_display(quiet=False, tty=True), LiveDisplay)


def test_live_display_shows_time_in_state_and_an_estimate_of_the_rest():
    now = [100.0]
    buf = io.StringIO()
    d = LiveDisplay(Console(file=buf, width=120, force_terminal=True), clock=lambda: now[0])
    d.start([Cell("a__r0", {}, 0, False), Cell("b__r0", {}, 0, False)])
    d.update("a__r0", "starting")
    now[0] += 42
    assert "starting 0:42" in _render(d._table())
    d.update("a__r0", "done", al=2.0, p0=0.6)
    now[0] += 18
    d.update("b__r0", "starting")
    text = _render(d._table())
    assert "specbench run  1:00, ~0:42 left" in text and "starting 0:00" in text
    d.close()


def test_a_plain_display_ends_with_the_screen_it_was_given_and_none_without():
    """The CLI hands the display report.screen.final_screen (report sits above run); a display
    without one prints no final screen rather than failing."""

    run = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
    out = io.StringIO()
    PlainDisplay(stream=out, final=final_screen).finish(run, [])
    text = out.getvalue()
    assert "AL [CI]" in text and "What the matrix asks" in text and f"specbench report {run}" in text
    bare = io.StringIO()
    PlainDisplay(stream=bare).finish(run, [])
    assert bare.getvalue() == ""

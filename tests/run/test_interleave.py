"""load.interleave: a speculative cell's load alternates with the same requests on its baseline's
server (run/interleave.py), and every speed-up (run screen, report, compare's gate) is computed
against those interleaved requests. The real servers are tests/run/test_groups_vllm.py's; here:
the block order and merge, which baseline each cell pairs with, the config's refusals, and the
readers on a committed run given a paired baseline (the figures checked against sums done here)."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import pytest
from factories import study

from specbench.analysis.speedup import INTERLEAVED_RERUN_SD
from specbench.cli.main import run_cli
from specbench.config import parse_study
from specbench.errors import ConfigError
from specbench.io import read_jsonl, write_jsonl
from specbench.load.driver import LoadResult, LoadSent
from specbench.report.baseline_pairs import run_speedups
from specbench.run.cells import expand
from specbench.run.interleave import PAIRED_DIR, interleaved_load, pairs

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
CELL, BASE = "mla-on__output_norm-on__r0", "baseline__mla-on__r0"


def _sender(side: str, log: list):
    def send(start: int, k: int) -> LoadResult:
        log.append((side, start, k))
        time.sleep(0.02)  # a block takes time: the next one starts later
        rows = [{"id": start + j, "start_s": 0.001 * j, "side": side} for j in range(k)]
        return LoadResult(requests=rows, started_at="t", duration_s=float(k), sent=LoadSent(num_requests=k))

    return send


def test_blocks_alternate_abba_and_each_side_gets_every_request_once():
    log: list = []
    cell, base, info = interleaved_load(10, 4, _sender("cell", log), _sender("base", log))
    assert log == [
        ("cell", 0, 4),
        ("base", 0, 4),
        ("base", 4, 4),
        ("cell", 4, 4),
        ("cell", 8, 2),
        ("base", 8, 2),
    ]
    assert info == {"block": 4, "blocks": 3, "order": "AB BA AB"}
    for res, side in ((cell, "cell"), (base, "base")):
        assert [r["id"] for r in res.requests] == list(range(10))
        assert [r["block"] for r in res.requests] == [r["id"] // 4 for r in res.requests]  # the interval's unit
        assert {r["side"] for r in res.requests} == {side}
        assert res.duration_s == 10.0  # its own blocks only, not the other side's
        assert res.sent.num_requests == 10
    # each block's requests timed from the first block's start: later blocks start later
    starts = [r["start_s"] for r in cell.requests]
    assert starts[4] > starts[3] and starts[8] > starts[7]


def test_each_speculative_cell_pairs_with_the_baseline_of_its_target():
    s = study(
        draft="org/draft", baseline=True, matrix={"mla": ["on", "off"], "num_speculative_tokens": [1, 2]}
    ).model_copy()
    s = s.model_copy(update={"load": s.load.model_copy(update={"interleave": 4})})
    cells = expand(s)
    got = pairs(s, cells)
    spec = [c for c in cells if not c.is_baseline]
    assert set(got) == {c.cell_id for c in spec} and len(spec) == 4
    for c in spec:
        assert got[c.cell_id].is_baseline and got[c.cell_id].axes["mla"] == c.axes["mla"]
    off = s.model_copy(update={"load": s.load.model_copy(update={"interleave": 0})})
    assert pairs(off, cells) == {}


@pytest.mark.parametrize(
    ("load", "extra", "says"),
    [
        ({"interleave": 4, "until": {"ci_half_width": {"acceptance_length": 0.1}}, "max_requests": 40}, {}, "until"),
        ({"interleave": 4}, {"executor": "ray"}, "executor 'local'"),
        ({"interleave": -1}, {}, "interleave"),
        ({"interleave": 2, "concurrency": 4}, {}, "below concurrency 4"),
        ({"interleave": 4}, {"matrix": {"mla": ["on"], "load:concurrency": [2, 8]}}, "below concurrency 8"),
    ],
)
def test_interleave_refuses_what_it_cannot_pair(load, extra, says):
    data = {
        "name": "t",
        "serve": {"model": "org/m", "speculative": {"draft": "org/d"}},
        "matrix": {"mla": ["on"]},
        "load": load,
        **extra,
    }
    with pytest.raises(ConfigError, match=says):
        parse_study(data, "t.yaml")


def _paired_copy(tmp_path: Path, factor: float) -> Path:
    """cpu-default with CELL given a paired baseline: BASE's own requests with every e2e and ttft
    times ``factor`` (factor 2: a baseline twice as slow, so the cell's speed-up doubles)."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    rows = read_jsonl(run / BASE / "requests.jsonl")
    for r in rows:
        r["e2e_s"] *= factor
        r["ttft_s"] *= factor
    write_jsonl(run / CELL / PAIRED_DIR / "requests.jsonl", rows)
    rec = json.loads((run / CELL / "cell.json").read_text())
    rec["paired_baseline"] = {"cell": BASE, "block": 4, "blocks": 5, "order": "AB BA AB BA AB", "requests": len(rows)}
    (run / CELL / "cell.json").write_text(json.dumps(rec))
    return run


def _tok_s(rows) -> float:
    ok = [r for r in rows if not r.get("error") and (r.get("output_tokens") or 0) >= 2]
    return sum(r["output_tokens"] for r in ok) / sum(r["e2e_s"] for r in ok)


def test_report_and_screen_measure_an_interleaved_cell_against_its_paired_requests(tmp_path):
    run = _paired_copy(tmp_path, 2.0)
    found = {s.cell: s for s in run_speedups(run).speedups}
    s, other = found[CELL], found["mla-on__output_norm-off__r0"]
    cell_rows = read_jsonl(run / CELL / "requests.jsonl")
    want = _tok_s(cell_rows) / _tok_s(read_jsonl(run / CELL / PAIRED_DIR / "requests.jsonl"))
    assert s.interleaved and s.paired and math.isclose(s.point["output_tok_per_s"], want, rel_tol=1e-12)
    assert math.isclose(want, 2 * _tok_s(cell_rows) / _tok_s(read_jsonl(run / BASE / "requests.jsonl")), rel_tol=1e-12)
    assert s.rerun_sd == INTERLEAVED_RERUN_SD
    # the other cells have no paired requests: against the baseline cell, widened as before
    assert not other.interleaved and other.rerun_sd > 0
    # a paired baseline that could not start leaves the cell measured against the baseline cell
    rec = json.loads((run / CELL / "cell.json").read_text())
    rec["paired_baseline"]["error"] = "the baseline's server did not start: boom"
    (run / CELL / "cell.json").write_text(json.dumps(rec))
    assert not {s.cell: s for s in run_speedups(run).speedups}[CELL].interleaved


@pytest.mark.heavy
def test_the_speedup_gate_uses_the_paired_requests(tmp_path, capsys):
    run = _paired_copy(tmp_path, 2.0)
    out = tmp_path / "c.json"
    run_cli(["compare", str(RUN), str(run), "--gate", "speedup:-5%", "--json", str(out), "--allow-inconclusive"])
    capsys.readouterr()
    data = json.loads(out.read_text())
    row = next(
        m
        for c in data["cells"]
        if c["name"] == "mla=on, output_norm=on"
        for m in c["metrics"]
        if m["name"] == "speedup"
    )
    base_rows = read_jsonl(RUN / BASE / "requests.jsonl")
    cell_rows = read_jsonl(run / CELL / "requests.jsonl")
    assert math.isclose(row["base"], _tok_s(cell_rows) / _tok_s(base_rows), rel_tol=1e-9)
    assert math.isclose(row["cand"], 2 * row["base"], rel_tol=1e-9)


def test_dry_run_names_each_baselines_second_server_or_says_it_changes_nothing(capsys):
    root = Path(__file__).resolve().parents[2]
    assert run_cli(["run", str(root / "configs" / "default.yaml"), "--dry-run", "--set", "load.interleave=4"]) == 0
    out = capsys.readouterr().out
    assert (
        "kept for the baseline cells (baseline__mla-on__r0 for 3 cell(s), baseline__mla-off__r0 for 3 cell(s))" in out
    )
    argv = ["run", str(root / "configs" / "default.yaml"), "--dry-run", "--set", "load.interleave=4"]
    assert run_cli([*argv, "--set", "baseline=false"]) == 0
    assert "no speculative cell has a baseline cell to alternate with: it changes nothing" in capsys.readouterr().out


def test_a_resumed_run_still_pairs_its_cells_with_a_finished_baseline(tmp_path):
    from specbench.run.interleave import Companions
    from specbench.run.lifecycle import RunContext

    s = study(draft="org/draft", baseline=True)
    s = s.model_copy(update={"load": s.load.model_copy(update={"interleave": 4})})
    cells = expand(s)
    left = [c for c in cells if not c.is_baseline]  # --resume: the baselines are done
    ctx = RunContext(study=s, run_dir=tmp_path, prompts=[], display=None, plan_cells=cells)
    comp = Companions(ctx, left, lambda *_: None)
    assert {cid: b.cell_id for cid, b in comp.pairs.items()} == {
        c.cell_id: f"baseline__mla-{c.axes['mla']}__r0" for c in left
    }
    assert sorted(comp.left.values()) == [1, 1]  # one companion per MLA value, one cell each


def test_baselines_differing_only_in_load_share_one_companion(tmp_path):
    from specbench.run.interleave import Companions
    from specbench.run.lifecycle import RunContext

    s = study(draft="org/draft", baseline=True, matrix={"load:concurrency": [1, 2, 4]})
    s = s.model_copy(update={"load": s.load.model_copy(update={"interleave": 4})})
    cells = expand(s)
    ctx = RunContext(study=s, run_dir=tmp_path, prompts=[], display=None, plan_cells=cells)
    comp = Companions(ctx, cells, lambda *_: None)
    # each speculative cell pairs with the baseline at its own concurrency...
    assert {c: b.axes["load:concurrency"] for c, b in comp.pairs.items()} == {
        c.cell_id: c.axes["load:concurrency"] for c in cells if not c.is_baseline
    }
    # ...and the three baselines, served alike, get one second server for all three cells
    assert list(comp.left.values()) == [3] and list(comp.names.values()) == ["baseline__concurrency-1__r0"]


@pytest.mark.heavy
def test_compare_names_a_speedup_measured_apart_against_one_measured_interleaved(tmp_path, capsys):
    run = _paired_copy(tmp_path, 1.0)
    m = json.loads((run / "manifest.json").read_text())
    m["resolved_config"]["load"]["interleave"] = 4
    (run / "manifest.json").write_text(json.dumps(m))
    run_cli(["compare", str(RUN), str(run), "--allow-inconclusive"])
    said = capsys.readouterr().err
    assert "runs differ: speed-up measurement (load.interleave blocks; 0: apart): baseline 0, candidate 4" in said
    run_cli(["compare", str(run), str(run), "--allow-inconclusive"])
    assert "load.interleave" not in capsys.readouterr().err  # alike: nothing to say


@pytest.fixture
def fake_sessions(monkeypatch) -> list:
    """interleave's ServerSession replaced by a fake (a real server cannot be made to die on cue
    here): every one made, in order; ``alive`` and ``stopped`` are theirs to read and set."""
    from specbench.run import interleave

    made: list = []

    class Session:
        def __init__(self, *a, **k):
            self.stopped, self.alive, self.startup_s, self.env = False, True, 1.0, {}
            self.server = type(
                "S", (), {"is_alive": lambda _: self.alive and not self.stopped, "url": "http://127.0.0.1:1"}
            )()
            made.append(self)

        def start(self):
            pass

        def stop(self):
            self.stopped = True

    monkeypatch.setattr(interleave, "ServerSession", Session)
    monkeypatch.setattr(interleave, "reset_prefix_cache", lambda server: "done")
    return made


def test_a_companion_is_stopped_whatever_ends_its_start_and_a_dead_one_is_not_reused(tmp_path, fake_sessions):
    """Fake sessions (a real server cannot be made to die on cue here): Ctrl-C in the warm-up still
    leaves the session for close() to stop; a companion found dead is stopped and reported."""
    from specbench.run import interleave
    from specbench.run.lifecycle import RunContext

    made = fake_sessions
    s = study(draft="org/draft", baseline=True, matrix={"mla": ["on"]})
    s = s.model_copy(update={"load": s.load.model_copy(update={"interleave": 4})})
    cells = expand(s)
    spec = next(c for c in cells if not c.is_baseline)
    display = type("D", (), {"update": lambda *a, **k: None})()
    ctx = RunContext(study=s, run_dir=tmp_path, prompts=[], display=display, plan_cells=cells)

    def interrupted(*_):
        raise KeyboardInterrupt

    comp = interleave.Companions(ctx, cells, interrupted)
    with pytest.raises(KeyboardInterrupt):
        comp.get(spec)
    comp.close()
    assert made[-1].stopped
    comp = interleave.Companions(ctx, cells, lambda *_: None)
    server, _, info = comp.get(spec)
    assert server is not None and info["prefix_cache_reset"] == "done"
    made[-1].alive = False
    server, _, info = comp.get(spec)
    assert server is None and info["error"] == "the baseline's server died before this cell" and made[-1].stopped


def test_the_companion_serves_its_baseline_cells_and_stops_after_the_last(tmp_path, fake_sessions):
    """Fake sessions: the companion stays up after its speculative cells while baseline cells of its
    server remain, serves() hands it to their group, and it stops after the last."""
    from specbench.run import interleave
    from specbench.run.lifecycle import RunContext

    s = study(draft="org/draft", baseline=True, matrix={"load:concurrency": [1, 2]})
    s = s.model_copy(update={"load": s.load.model_copy(update={"interleave": 4})})
    cells = expand(s)
    spec = [c for c in cells if not c.is_baseline]
    bases = [c for c in cells if c.is_baseline]
    ctx = RunContext(
        study=s, run_dir=tmp_path, prompts=[], display=type("D", (), {"update": print})(), plan_cells=cells
    )
    comp = interleave.Companions(ctx, cells, lambda *_: None)
    assert comp.serves(bases) is None  # not started yet: the group would start its own
    server, _, _ = comp.get(spec[0])
    session = next(iter(comp.sessions.values()))
    for c in spec:
        comp.done(c.cell_id, c)
    assert not session.stopped  # its baseline cells are still to run
    served = comp.serves(bases)
    assert (
        served is not None and served[0] is session and served[1] == "companions/baseline__concurrency-1__r0/server.log"
    )
    assert comp.serves(spec) is None  # a speculative group never runs on it
    comp.done(bases[0].cell_id, bases[0])
    assert not session.stopped
    session.alive = False
    assert comp.serves(bases[1:]) is None  # found dead: the group starts a server of its own
    session.alive = True
    comp.done(bases[1].cell_id, bases[1])
    assert session.stopped and not comp.sessions

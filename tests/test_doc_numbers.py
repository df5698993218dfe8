"""Numbers the docs state that the code or a committed run can produce, checked against it:

- "N cells on M servers" for a config: what `specbench run CONFIG --dry-run` plans (the same
  grouping, run/groups.py); every such phrase in README.md and docs/ is either checked here or
  listed as a past measurement of a study not in configs/;
- a committed run's wall time ("3 min 43 s", "8 min"), load ("20 requests × 64 tokens,
  concurrency 4"): its manifest;
- the default study page's copy of the run's final screen, and README's abridged one: `final_screen`
  of the committed run now.

A doc that changes one of these without the code, or code that changes one without the doc, fails here."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from specbench.report.screen import final_screen
from specbench.run.groups import group_cells
from specbench.run.plan import validated

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SERVERS = re.compile(r"(\d+) cells on (\d+) servers?")

# (doc, the phrase, the config it is about)
PLANNED = [
    ("README.md", "8 cells on 4 servers", "configs/default.yaml"),
    ("docs/studies/default.md", "8 cells on 4 servers", "configs/default.yaml"),
    ("docs/studies/seed-questions.md", "13 cells on 3 servers", "configs/seed-questions.yaml"),
    ("docs/studies/eagle3.md", "4 cells on 4 servers", "configs/eagle3.yaml"),
]
# phrases about a measured run of a study made for a benchmark, not a config of configs/
PAST = [("docs/performance.md", "6 cells on 2 servers")]

# (doc, the phrase, the committed run it is about)
WALL = [
    ("docs/studies/default.md", "3 min 43 s", "results/baselines/cpu-default"),
    ("README.md", "3 min 43 s", "results/baselines/cpu-default"),
    ("docs/studies/seed-questions.md", "13 servers, 23 min", "results/reruns/seed-questions-2026-12-03"),
    ("docs/studies/seed-questions.md", "3 servers, 8 min", "results/baselines/cpu-seed-questions"),
    ("docs/studies/eagle3.md", "3 min 30 s", "results/baselines/cpu-eagle3"),
    ("docs/studies/calibration.md", "5 min 55 s", "results/baselines/cpu-calibration"),
    ("docs/studies/calibration.md", "12 min 4 s", "results/baselines/cpu-calibration-speedup"),
]
LOAD = [
    ("docs/studies/default.md", "20 requests × 64 tokens, concurrency 4", "results/baselines/cpu-default"),
    ("docs/studies/eagle3.md", "20 requests × 64 tokens, concurrency 4", "results/baselines/cpu-eagle3"),
]


def _text(doc: str) -> str:
    return " ".join((ROOT / doc).read_text().split())  # a phrase may wrap across lines


@pytest.mark.parametrize(("doc", "phrase", "config"), PLANNED)
def test_cells_on_servers_is_what_the_planner_plans(doc, phrase, config):
    assert phrase in _text(doc), f"{doc} no longer says {phrase!r}: update PLANNED"
    study, cells = validated(ROOT / config)
    groups = group_cells(cells, study.serve.host, study.serve.share_servers)
    n_cells, n_servers = (int(x) for x in SERVERS.search(phrase).groups())
    assert (len(cells), len(groups)) == (n_cells, n_servers), f"{doc}: {config} plans {len(cells)} on {len(groups)}"


def test_every_cells_on_servers_phrase_is_checked():
    known = {(d, p) for d, p, _ in PLANNED} | set(PAST)
    for doc in DOCS:
        rel = str(doc.relative_to(ROOT))
        for m in SERVERS.finditer(" ".join(doc.read_text().split())):
            assert (rel, m.group(0)) in known, f"{rel}: {m.group(0)!r} is checked nowhere: add it to PLANNED"


def _minutes(run: str) -> float:
    m = json.loads((ROOT / run / "manifest.json").read_text())
    start, end = (datetime.fromisoformat(m[k]) for k in ("started_at", "ended_at"))
    return (end - start).total_seconds() / 60


@pytest.mark.parametrize(("doc", "phrase", "run"), WALL)
def test_a_runs_wall_time_is_its_manifests(doc, phrase, run):
    assert phrase in _text(doc), f"{doc} no longer says {phrase!r}: update WALL"
    minutes = _minutes(run)
    exact = re.search(r"(\d+) min (\d+) s", phrase)
    if exact:
        assert round(minutes * 60) == int(exact[1]) * 60 + int(exact[2]), (doc, minutes)
    else:
        assert round(minutes) == int(re.search(r"(\d+) min", phrase)[1]), (doc, minutes)
    servers = re.search(r"(\d+) servers", phrase)
    if servers:
        assert int(servers[1]) == _servers(ROOT / run), (doc, phrase)


def _servers(run: Path) -> int:
    """Servers a run started: one per shared group (cell.json server_group) and one per other cell."""
    groups, alone = set(), 0
    for p in run.glob("*/cell.json"):
        group = json.loads(p.read_text()).get("server_group")
        if isinstance(group, dict):
            groups.add(group["id"])
        else:
            alone += 1
    return len(groups) + alone


@pytest.mark.parametrize(("doc", "phrase", "run"), LOAD)
def test_a_runs_load_is_its_manifests(doc, phrase, run):
    assert phrase in _text(doc), f"{doc} no longer says {phrase!r}: update LOAD"
    load = json.loads((ROOT / run / "manifest.json").read_text())["resolved_config"]["load"]
    n, tokens, conc = (int(x) for x in re.findall(r"\d+", phrase))
    assert (load["num_requests"], load["max_tokens"], load["concurrency"]) == (n, tokens, conc)


def test_the_default_pages_final_screen_is_what_the_code_prints_now():
    """docs/studies/default.md copies the run's final screen at 100 columns, its last line (the
    report command) left out."""
    text = (ROOT / "docs" / "studies" / "default.md").read_text()
    block = text.split("## What the run prints at the end", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    buf = io.StringIO()
    Console(file=buf, width=100, no_color=True).print(final_screen(ROOT / "results" / "baselines" / "cpu-default"))
    printed = [line.rstrip() for line in buf.getvalue().splitlines()]
    assert printed[-1].startswith("Report, plots and divergence: specbench report")
    assert [line.rstrip() for line in block.rstrip("\n").splitlines()] == printed[:-1]


def test_readmes_abridged_screen_is_what_the_code_prints_now():
    """Each line of README's block is a line of the screen (at 120 columns, spacing aside), or
    its start where it ends in "; ..."; "..." lines stand for rows left out."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## What a run tells you", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    buf = io.StringIO()
    Console(file=buf, width=120, no_color=True).print(final_screen(ROOT / "results" / "baselines" / "cpu-default"))
    printed = [" ".join(line.split()) for line in buf.getvalue().splitlines()]
    shown = [" ".join(line.split()) for line in block.splitlines() if line.strip() and line.strip() != "..."]
    assert len(shown) >= 6
    for line in shown:
        if line.endswith("; ..."):
            assert any(p.startswith(line[: -len(" ...")]) for p in printed), line
        else:
            assert line in printed, line


def test_readmes_speedup_study_pays_at_one_and_not_at_its_highest_concurrency():
    """README's speed-up study: its committed run's line is what the code says now, and the claim
    under it holds on the run's own intervals: faster than no speculation at concurrency 1 (the
    interval above 1x), not faster at the highest concurrency it runs (the interval reaches 1x or
    lies below)."""
    from specbench.analysis.where_it_pays import levels, where_it_pays
    from specbench.report.baseline_pairs import run_speedups

    config = yaml.safe_load((ROOT / "configs" / "speedup.yaml").read_text())
    study = run_speedups(ROOT / "results" / "baselines" / "cpu-speedup")
    line = where_it_pays(study.speedups, study.cell_axes)
    block = (ROOT / "README.md").read_text().split("### Where speculation pays", 1)[1]
    assert "configs/speedup.yaml" in block and line in block
    found = levels(study.speedups, study.cell_axes)
    assert [lv.concurrency for lv in found] == config["matrix"]["load:concurrency"]
    first, last = found[0], found[-1]
    assert first.concurrency == 1 and first.best.intervals["output_tok_per_s"][0] > 1
    at_last = [s for s in study.speedups if study.cell_axes[s.cell].get("concurrency") == str(last.concurrency)]
    assert at_last and all(s.intervals["output_tok_per_s"][0] <= 1 for s in at_last)

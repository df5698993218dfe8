"""A side cell's k comes from one function, compare/sides.py's side_k, in one documented order: on
every committed run it is the k the cell's own files name, read here without compare (cell.json's
``spec.num_speculative_tokens`` and the number of positions of acceptance.json's /metrics counts),
and on a copy of the k sweep each source takes over, in its order, when those before it are gone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specbench.compare.sides import KSources, load_side, side_k

BASELINES = Path(__file__).resolve().parents[2] / "results" / "baselines"
RUNS = sorted(p for p in BASELINES.iterdir() if (p / "manifest.json").is_file())
K_SWEEP = BASELINES / "cpu-k-sweep"
K2 = "num_speculative_tokens-2__r0"


def _files_k(run: Path, cell_ids: list[str]) -> set[int]:
    """Every k the cells' own files name, read as plain JSON."""
    ks = set()
    for cell_id in cell_ids:
        cell = json.loads((run / cell_id / "cell.json").read_text())
        counts = json.loads((run / cell_id / "acceptance.json").read_text())["prometheus"]["counts"]
        ks |= {cell["spec"]["num_speculative_tokens"], len(counts["accepted_per_position"])}
    return ks


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_committed_cell_has_the_k_its_files_name(run: Path) -> None:
    side = load_side(run)
    speculative = [c for c in side.cells.values() if not c.is_baseline]
    assert speculative
    for cell in side.cells.values():
        assert cell.k == (None if cell.is_baseline else _files_k(run, cell.cell_ids).pop()), cell.name
        assert cell.is_baseline or len(_files_k(run, cell.cell_ids)) == 1, cell.name


def test_the_k_sweep_has_each_cell_s_own_k() -> None:
    assert {c.k for c in load_side(K_SWEEP).cells.values()} == {None, 1, 2, 3}  # not the study's k, 3


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return Path(shutil.copytree(K_SWEEP, tmp_path / "run", ignore=shutil.ignore_patterns("server.log", "*.prom")))


def test_the_counts_outrank_what_cell_json_asked_for(sweep: Path) -> None:
    """A cell.json claiming k 5 over counts of 2 positions: the side's k is what was measured."""
    _edit(sweep / K2 / "cell.json", lambda c: c["spec"].update(num_speculative_tokens=5))
    assert load_side(sweep).cells[(("num_speculative_tokens", "2"),)].k == 2
    _edit(sweep / K2 / "acceptance.json", lambda a: a.update(num_spec_tokens=None))  # then vLLM's counts alone
    assert load_side(sweep).cells[(("num_speculative_tokens", "2"),)].k == 2


def test_a_cell_that_measured_nothing_takes_the_planned_k(sweep: Path) -> None:
    """A failed cell of a run from before cell.json had spec: its k axis, not the study's static 3."""

    def failed_without_spec(c: dict) -> None:
        c.pop("spec")
        c.update(status="failed", reason="server died")

    _edit(sweep / K2 / "cell.json", failed_without_spec)
    failed = load_side(sweep).failed[(("num_speculative_tokens", "2"),)]
    assert failed.k == 2


def test_the_precedence_as_documented() -> None:
    every = KSources(measured=True, measured_at=4, counted=3, recorded=2, planned=1)
    assert side_k(None, every, baseline=False) == 4  # acceptance.json's k, written beside the counts
    assert side_k(None, KSources(True, None, 3, 2, 1), baseline=False) == 3  # what vLLM counted
    assert side_k(None, KSources(True, None, None, 2, 1), baseline=False) == 2  # cell.json's claim
    assert side_k(None, KSources(True, None, None, None, 1), baseline=False) == 1  # the axis / study
    assert side_k(6, KSources(False, 4, 3, 2, 1), baseline=False) == 6  # measured nothing: keeps its k
    assert side_k(None, KSources(False, 4, 3, 2, 1), baseline=True) is None  # a baseline: only counts give one
    assert side_k(None, KSources(True, 4, 3, 2, 1), baseline=True) == 4

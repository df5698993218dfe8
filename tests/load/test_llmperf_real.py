"""A study cell driven by the REAL ray-project/llmperf against real vLLM-CPU, with faults.

Runs only where a checkout is configured (it is not on PyPI and needs its own venv):
``SPECBENCH_LLMPERF_PATH`` (the clone) and ``SPECBENCH_LLMPERF_PYTHON`` (its venv's python), with
llmperf's tokenizer loadable offline (see docs/load.md). Elsewhere the stand-in tests in
test_llmperf.py cover the same defects.

The load asks for prompts of 300 +- 150 llmperf tokens on a server with max_model_len 512, so some
requests are answered 400 (llmperf's thread dies on each without recording it). The cell must count
them as failed, say which requests its acceptance covers, and give server-true throughput.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.conftest import vllm_env

PATH, PYTHON = os.environ.get("SPECBENCH_LLMPERF_PATH"), os.environ.get("SPECBENCH_LLMPERF_PYTHON")

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not (PATH and PYTHON), reason="set SPECBENCH_LLMPERF_PATH and SPECBENCH_LLMPERF_PYTHON"),
]


def test_real_llmperf_cell_counts_failed_requests(tmp_path):
    study = yaml.safe_load(
        open(os.path.join(os.path.dirname(__file__), "..", "..", "specbench", "configs", "default.yaml"))
    )
    study.update(name="llmperf-fault", matrix={}, baseline=False, results_dir=str(tmp_path / "results"))
    study["load"] = {
        "driver": "llmperf",
        "num_requests": 16,
        "concurrency": 4,
        "max_tokens": 64,
        "temperature": 0.0,
        "warmup_requests": 2,
        "max_error_rate": 0.5,
        "llmperf": {
            "path": PATH,
            "python": PYTHON,
            "mean_input_tokens": 300,
            "extra_args": ["--stddev-input-tokens", "150"],
        },
    }
    cfg = tmp_path / "study.yaml"
    cfg.write_text(yaml.safe_dump(study))
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg)],
        capture_output=True,
        text=True,
        env=vllm_env(tmp_path),
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (run_dir,) = (tmp_path / "results").iterdir()
    cell_dir = run_dir / "r0"
    cell = json.loads((cell_dir / "cell.json").read_text())
    acc = cell["load_accounting"]
    rows = [json.loads(line) for line in (cell_dir / "requests.jsonl").read_text().splitlines()]
    failed = [x for x in rows if x.get("error")]
    server = acc["server"]
    print("\naccounting:", json.dumps(acc, indent=1))
    assert acc["requested"] == 16 and len(rows) == acc["recorded"] + len([x for x in rows if x.get("llmperf_dropped")])
    assert server["http_failed"] > 0, "no request was rejected: the fault injection did not fire"
    assert len(failed) == acc["failed"] >= server["http_failed"]
    assert any("maximum context length" in x["error"] for x in failed), failed[0]["error"]
    assert server["completed"] - (len(rows) - len(failed)) == acc["server_not_recorded"]
    summary = json.loads((cell_dir / "summary.json").read_text())
    assert summary["results_number_errors"] == len(failed)
    assert summary["specbench_itl_method"] == "llmperf_per_chunk"
    assert summary["specbench_output_tok_per_s"] and summary["llmperf_output_tok_per_s"]
    acceptance = json.loads((cell_dir / "acceptance.json").read_text())
    print("acceptance:", json.dumps({k: acceptance.get(k) for k in ("derived", "agreement", "warnings")}, indent=1))
    assert acceptance["agreement"]["logs_vs_prometheus"] is True
    print(
        "summary:",
        {
            k: summary[k]
            for k in (
                "specbench_output_tok_per_s",
                "llmperf_output_tok_per_s",
                "results_number_errors",
                "results_num_requests_started",
            )
        },
    )

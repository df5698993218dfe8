"""specbench/run/runner.py with real vLLM processes that fail or are interrupted (cheap: none serves).

- cells whose server exits at start are recorded as failed, the run goes on, exit 3;
- secrets given in the config never reach any file under the run directory;
- --resume refuses a config file changed since the run;
- Ctrl-C while a server starts: the server is stopped, the cell saved as failed, exit 130.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from specbench.results.store import load_run

pytestmark = pytest.mark.vllm

SECRET_TOKEN = "hf_specbenchtestsecret123"
SECRET_KEY = "sk-specbench-test-key-456"


def vllm_env(tmp: Path) -> dict[str, str]:
    import os

    return {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1"}


def _config(tmp_path: Path, **over) -> Path:
    data = {
        "name": "fail",
        "serve": {
            "model": "fixture:target",
            "enforce_eager": True,
            "max_model_len": 512,
            "max_num_seqs": 4,
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_TOKEN": SECRET_TOKEN},
            "extra_args": ["--api-key", SECRET_KEY],
            "startup_timeout_s": 300,
        },
        # vLLM's argument parser rejects both values: each server exits at once with status 2.
        "matrix": {"flag:--max-num-seqs": ["many", "lots"]},
        "load": {"num_requests": 2, "warmup_requests": 0},
    }
    data.update(over)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(args, tmp_path, timeout=600):
    pytest.importorskip("vllm")
    return subprocess.run(
        [sys.executable, "-m", "specbench", "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=vllm_env(tmp_path),
    )


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("failed-run")
    cfg = _config(tmp)
    r = _run([str(cfg), "--results-dir", str(tmp / "results"), "--quiet"], tmp)
    return cfg, r, Path(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else None


def test_failed_cells_recorded_and_run_continues(failed_run):
    _, r, run_dir = failed_run
    assert r.returncode == 3, r.stderr
    run = load_run(run_dir)
    assert run.manifest.status == "some_failed"
    assert [c.status for c in run.cells.values()] == ["failed", "failed"]  # the second cell ran too
    for c in run.cells.values():
        assert c.record.exit_status not in (None, 0)
        assert "exited with status" in c.record.reason
        assert "max-num-seqs" in c.record.log_tail or "max_num_seqs" in c.record.log_tail
    assert (run_dir / "cells.csv").read_text().count("failed") == 2


def test_secrets_never_written(failed_run):
    _, _, run_dir = failed_run
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.name == "server.log" for p in files)
    for p in files:
        data = p.read_bytes()
        assert SECRET_TOKEN.encode() not in data, p
        assert SECRET_KEY.encode() not in data, p
    cell = json.loads(next(run_dir.glob("*/cell.json")).read_text())
    assert cell["env"]["HF_TOKEN"] == "***"


def test_resume_refuses_changed_config(failed_run, tmp_path):
    cfg, _, run_dir = failed_run
    cfg.write_text(cfg.read_text() + "\n# edited\n")
    r = _run(["--resume", str(run_dir)], tmp_path, timeout=120)
    assert r.returncode == 2
    assert "changed since run" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_stops_server_and_keeps_run(tmp_path, sig, signalable):
    pytest.importorskip("vllm")
    cfg = _config(
        tmp_path, matrix={}, serve={**yaml.safe_load(_config(tmp_path).read_text())["serve"], "extra_args": []}
    )
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--results-dir", str(results), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=vllm_env(tmp_path),
        **signalable,
    )
    try:
        deadline = time.monotonic() + 300
        log = None
        while time.monotonic() < deadline and log is None:
            found = list(results.glob("*/*/server.log"))
            log = found[0] if found and found[0].stat().st_size > 0 else None
            time.sleep(0.5)
        assert log is not None, "server never started"
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "no vLLM process to stop"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    run_dir = log.parent.parent
    run = load_run(run_dir)
    assert run.manifest.status == "interrupted"
    (cell,) = run.cells.values()
    assert cell.status == "failed" and "interrupted" in cell.record.reason


def test_load_errors_above_threshold_fail_the_cell_and_the_api_key_is_sent(tmp_path):
    """A server that starts fine but refuses most requests fails the cell with the first error.

    Two of three prompts are longer than max_model_len, which vLLM answers with 400; 2/3 is above
    max_error_rate 0.5. The short prompt succeeds, so the server's --api-key reached the load
    (without it every request would be a 401), and no file under the run directory holds the key.
    """
    prompts = tmp_path / "prompts.jsonl"
    long_text = " ".join(f"w{i}" for i in range(1500))  # > 512 tokens with the fixture tokenizer
    prompts.write_text("\n".join(json.dumps({"prompt": t}) for t in ["Say hi.", long_text, long_text + " again"]))
    cfg = _config(
        tmp_path,
        matrix={},
        load={
            "num_requests": 3,
            "concurrency": 3,
            "warmup_requests": 0,
            "max_tokens": 8,
            "max_error_rate": 0.5,
            "prompts": {"path": str(prompts)},
        },
    )
    r = _run([str(cfg), "--results-dir", str(tmp_path / "results"), "--quiet"], tmp_path)
    assert r.returncode == 3, r.stderr
    run_dir = Path(r.stdout.strip().splitlines()[-1])
    (cell,) = load_run(run_dir).cells.values()
    assert cell.status == "failed"
    assert cell.record.reason.startswith("2/3 requests failed (max_error_rate 0.5); first error: HTTP 400"), (
        cell.record.reason
    )
    reqs = [json.loads(x) for x in (run_dir / cell.record.cell_id / "requests.jsonl").read_text().splitlines()]
    assert sorted(q["error_code"] or 0 for q in reqs) == [0, 400, 400]
    assert [q["output_tokens"] for q in reqs if not q["error_code"]] == [8]
    for p in (p for p in run_dir.rglob("*") if p.is_file()):
        assert SECRET_KEY.encode() not in p.read_bytes(), p


def test_interrupt_test_holds_when_the_suite_starts_with_sigint_ignored(tmp_path):
    """Issue 17: a background job of a non-interactive shell (``nohup ./run-tests.sh &``) starts
    with SIGINT ignored. One interrupt test, launched that way, must still pass: its child gets
    the default disposition back (the ``signalable`` fixture). The probe line proves that the
    launch really ignored SIGINT on entry, so this check cannot pass vacuously."""
    node = "tests/run/test_runner.py::test_ctrl_c_stops_server_and_keeps_run[SIGINT]"
    probe = "import signal; print('SIGINT ignored on entry:', signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    script = '"$0" -c "$1" & wait $!; "$0" -m pytest -q -n 0 -p no:cacheprovider --basetemp "$2" "$3" & wait $!'
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        ["bash", "-c", script, sys.executable, probe, str(tmp_path / "inner"), node],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
        env=vllm_env(tmp_path),
    )
    assert "SIGINT ignored on entry: True" in r.stdout, r.stdout
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]

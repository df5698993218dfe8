"""The CLI's face: command order, metavars as in the README, no <bool> on flags, --debug anywhere,
``--set`` overrides checked like the config file (in-process through run_cli, no servers)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from specbench.cli.main import run_cli, split_debug


def _help(capsys, *argv) -> str:
    assert run_cli([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_commands_in_workflow_order_and_flags_without_bool(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    top = _help(capsys)
    names = re.findall(r"^│ (run|validate|report|compare|parse|fixtures) ", top, flags=re.M)
    assert names == ["run", "validate", "report", "compare", "parse", "fixtures"]
    for cmd in ([], ["run"], ["validate"], ["report"], ["compare"], ["parse"]):
        assert "<bool>" not in _help(capsys, *cmd), cmd


def test_metavars_match_the_readme(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert "specbench run [OPTIONS] [CONFIG]" in _help(capsys, "run")
    assert "RUN_DIR" in _help(capsys, "run")
    assert re.search(r"specbench compare \[OPTIONS\] \S*BASE\S* \S*CAND", _help(capsys, "compare"))
    assert re.search(r"specbench parse \[OPTIONS\] \S*FILES", _help(capsys, "parse"))


def test_debug_is_accepted_before_or_after_the_subcommand(monkeypatch):
    assert split_debug(["report", "x", "--debug", "--", "--debug"]) == (["report", "x", "--", "--debug"], True)
    assert split_debug(["--debug", "validate"]) == (["validate"], True)
    assert split_debug(["validate"]) == (["validate"], False)
    monkeypatch.setenv("SPECBENCH_DEBUG", "0")  # off; restored (unset) after the test
    assert run_cli(["validate", "--debug"]) == 0  # not "no such option"
    assert os.environ.get("SPECBENCH_DEBUG") == "1"


def test_set_overrides_are_checked_like_the_file(capsys):
    assert run_cli(["validate", "--set", "matrix.mla=[on]"]) == 0
    assert "4 cells" in capsys.readouterr().out  # one MLA value: 3 speculative cells + 1 baseline
    for bad, names in (
        ("load.num_requests=abc", "load.num_requests"),
        ("load.nmu_requests=3", "load.nmu_requests"),
        ("load.num_requests=0", "greater than or equal to 1"),
        ("=3", "KEY.PATH=VALUE"),
        ("load.num_requests.x=3", "not a mapping"),
    ):
        assert run_cli(["validate", "--set", bad]) == 2, bad
        err = capsys.readouterr().err
        assert names in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_set_reaches_the_dry_run_argv(capsys):
    assert run_cli(["run", "--dry-run", "--set", "serve.extra_args=[--seed, '7']"]) == 0
    out = capsys.readouterr().out
    assert out.count("--seed 7") == 8  # every cell's server argv


def test_set_with_resume_is_refused(capsys, tmp_path):
    assert run_cli(["run", "--resume", str(tmp_path), "--set", "load.num_requests=4"]) == 2
    assert "--resume" in capsys.readouterr().err


def test_apply_overrides_creates_mappings_and_copies():
    from specbench.config.overrides import apply_overrides

    data = {"load": {"num_requests": 20}}
    out = apply_overrides(data, ["load.num_requests=40", "serve.extra_args=[--x]"])
    assert out == {"load": {"num_requests": 40}, "serve": {"extra_args": ["--x"]}}
    assert data == {"load": {"num_requests": 20}}  # the loaded file is not changed
    with pytest.raises(Exception, match="load.num_requests"):
        apply_overrides(data, ["load.num_requests.deep=1"])


def test_run_names_its_output_directory_out_like_report(capsys, monkeypatch):
    """One scheme: --out names where a command writes (run and report); --results-dir still works, hidden."""
    monkeypatch.setenv("COLUMNS", "120")
    run_help, report_help = _help(capsys, "run"), _help(capsys, "report")
    assert "--out" in run_help and "--out" in report_help and "--results-dir" not in run_help
    assert run_cli(["run", "--out", "a", "--results-dir", "b", "--dry-run"]) == 2
    assert "--out" in capsys.readouterr().err


def _vllm_args(log: Path) -> set[str]:
    """The flags vLLM says it was started with ("non-default args: {...}", first line of the log)."""
    import ast

    line = re.search(r"non-default args: (\{.*\})", log.read_text(errors="replace"))
    assert line, log
    return set(ast.literal_eval(line[1])) - {"model_tag", "model", "host", "port"}


def test_dry_run_argv_is_what_vllm_was_started_with(capsys):
    """Each cell's printed argv against the committed default run's own server logs: a shared,
    switching server also gets --worker-extension-cls (the dry run once printed the cell's argv only)."""
    import shlex

    assert run_cli(["run", "configs/default.yaml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    run = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-default"
    printed = dict(re.findall(r"\n\[(\S+)\] axes=.*?\n(?:  server: .*\n)?  argv: (.*)\n", out))
    assert len(printed) == 8
    for cell_id, argv in printed.items():
        cell = json.loads((run / cell_id / "cell.json").read_text())
        group = cell.get("server_group")
        log = run / group["log"] if group else run / cell_id / "server.log"
        flags = {a[2:].replace("-", "_") for a in shlex.split(argv) if a.startswith("--")} - {"host", "port"}
        assert flags == _vllm_args(log), cell_id
    assert sum("--worker-extension-cls" in a for a in printed.values()) == 6

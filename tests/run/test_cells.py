"""specbench/run/cells.py: matrix expansion into cells with their exact argv and env."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specbench.config import load_config, parse_study
from specbench.records.baseline import draft_axes_of, pick_baseline, target_mismatch
from specbench.records.files import Manifest
from specbench.redact import redact_argv
from specbench.run.cells import expand, supports_per_request_metrics
from specbench.serve.server import server_argv
from specbench.serve.vllm_main import installed_vllm_version

ROOT = Path(__file__).resolve().parents[2]


def _study(**over):
    data = {
        "name": "t",
        "serve": {
            "model": "fixture:target",
            "speculative": {"draft": "fixture:draft", "num_speculative_tokens": 3},
            "enforce_eager": True,
            "max_model_len": 512,
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
            "per_request_metrics": "off",
        },
        "matrix": {"mla": ["on", "off"], "output_norm": ["on", "off"]},
        "baseline": True,
    }
    data.update(over)
    return parse_study(data, "test")


def _ident(ref: str) -> str:
    return {"fixture:target": "/m/target", "fixture:draft": "/m/draft"}.get(ref, ref)


def test_default_matrix_order_ids_and_one_baseline_per_mla_value():
    cells = expand(_study(), _ident)
    assert [c.cell_id for c in cells] == [
        "mla-on__output_norm-on__r0",
        "mla-on__output_norm-off__r0",
        "mla-off__output_norm-on__r0",
        "mla-off__output_norm-off__r0",
        "baseline__mla-on__r0",
        "baseline__mla-off__r0",
    ]
    on, off = cells[-2:]
    assert on.is_baseline and on.axes == {"mla": "on", "output_norm": "none"}
    assert off.is_baseline and off.axes == {"mla": "off", "output_norm": "none"}
    for base in (on, off):
        assert "--speculative-config" not in base.args and "SPECBENCH_OUTPUT_NORM" not in base.env
    assert on.env["VLLM_MLA_DISABLE"] == "0" and off.env["VLLM_MLA_DISABLE"] == "1"


def test_no_target_axis_keeps_the_plain_baseline_id():
    cells = expand(_study(matrix={"output_norm": ["on", "off"], "num_speculative_tokens": [1, 3]}, repeats=2), _ident)
    assert [c.cell_id for c in cells if c.is_baseline] == ["baseline__r0", "baseline__r1"]
    assert cells[-1].axes == {"output_norm": "none", "num_speculative_tokens": "none"}


def test_env_and_flag_axes_are_target_axes_unless_listed_as_draft_axes():
    study = _study(
        matrix={"output_norm": ["on"], "env:FOO": ["a", "b"], "flag:--seed": [1, 2], "env:DRAFT_ONLY": ["x", "y"]},
        baseline={"enabled": True, "draft_axes": ["env:DRAFT_ONLY"]},
    )
    bases = [c for c in expand(study, _ident) if c.is_baseline]
    assert [c.cell_id for c in bases] == [
        "baseline__FOO-a__seed-1__r0",
        "baseline__FOO-a__seed-2__r0",
        "baseline__FOO-b__seed-1__r0",
        "baseline__FOO-b__seed-2__r0",
    ]
    b = bases[-1]
    assert b.env["FOO"] == "b" and b.args[b.args.index("--seed") + 1] == "2"
    assert "DRAFT_ONLY" not in b.env and b.axes["env:DRAFT_ONLY"] == "none"


def test_a_flag_axis_listed_as_draft_axis_gives_no_baseline_of_its_own():
    study = _study(
        matrix={"output_norm": ["on"], "flag:--draft-opt": [1, 2]},
        baseline={"enabled": True, "draft_axes": ["flag:--draft-opt"]},
    )
    cells = expand(study, _ident)
    spec = [c for c in cells if not c.is_baseline]
    assert [c.cell_id for c in spec] == ["output_norm-on__draft-opt-1__r0", "output_norm-on__draft-opt-2__r0"]
    assert spec[1].args[spec[1].args.index("--draft-opt") + 1] == "2"
    (base,) = [c for c in cells if c.is_baseline]
    assert base.cell_id == "baseline__r0" and "--draft-opt" not in base.args
    assert base.axes == {"output_norm": "none", "flag:--draft-opt": "none"}


def test_draft_axes_must_name_env_or_flag_axes_of_the_matrix():
    with pytest.raises(Exception, match=r"baseline.draft_axes\[0\]: 'env:NOPE'"):
        _study(baseline={"enabled": True, "draft_axes": ["env:NOPE"]})
    with pytest.raises(Exception, match=r"baseline.draft_axes\[0\]: 'mla'"):
        _study(baseline={"enabled": True, "draft_axes": ["mla"]})


def test_every_spec_cell_pairs_with_the_baseline_of_its_target_values():
    cells = expand(_study(repeats=2), _ident)
    bases = [(c.axes, c.repeat, c.cell_id) for c in cells if c.is_baseline]
    for c in cells:
        if not c.is_baseline:
            got = pick_baseline(c.axes, c.repeat, bases)
            assert got == f"baseline__mla-{c.axes['mla']}__r{c.repeat}", c.cell_id


def test_old_single_baseline_does_not_pair_with_other_target_values():
    """A run directory from before per-target baselines: one mla=on baseline for every cell."""
    old = [({"mla": "on", "output_norm": "none"}, 0, "baseline__r0")]
    assert pick_baseline({"mla": "on", "output_norm": "off"}, 0, old) == "baseline__r0"
    assert pick_baseline({"mla": "off", "output_norm": "on"}, 0, old) is None
    assert pick_baseline({"mla": "on", "output_norm": "on"}, 1, old) is None  # other repeat
    assert target_mismatch({"mla": "off", "output_norm": "on"}, old[0][0]) == ["mla"]
    # axis labels (as report shows them) work like raw names; draft-only axes never mismatch
    assert target_mismatch({"FOO": "a", "D": "x"}, {"FOO": "b", "D": "none"}, ["env:D"]) == ["FOO"]


def test_argv_and_env_of_a_cell():
    cell = expand(_study(), _ident)[3]  # mla off, output_norm off
    assert cell.args[0] == "/m/target"
    spec = json.loads(cell.args[cell.args.index("--speculative-config") + 1])
    assert spec == {"method": "eagle", "model": "/m/draft", "num_speculative_tokens": 3}
    assert cell.args[cell.args.index("--max-model-len") + 1] == "512"
    assert "--enforce-eager" in cell.args and "--host" not in cell.args
    assert cell.env["VLLM_MLA_DISABLE"] == "1"
    assert cell.env["SPECBENCH_OUTPUT_NORM"] == "off"
    assert cell.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert cell.env["VLLM_LOG_STATS_INTERVAL"] == "1"
    assert cell.output_norm == "off" and cell.draft == "/m/draft"


def test_generic_axes_repeats_and_k():
    study = _study(
        matrix={
            "num_speculative_tokens": [2, 4],
            "env:FOO": ["a"],
            "flag:--max-num-batched-tokens": [256],
            "flag:--disable-log-requests": [True, False],
        },
        repeats=2,
        baseline=False,
    )
    cells = expand(study, _ident)
    assert len(cells) == 2 * 1 * 1 * 2 * 2
    c = cells[0]
    assert c.cell_id == "num_speculative_tokens-2__FOO-a__max-num-batched-tokens-256__disable-log-requests-True__r0"
    assert cells[1].cell_id.endswith("__r1") and cells[1].axes == c.axes
    assert json.loads(c.args[c.args.index("--speculative-config") + 1])["num_speculative_tokens"] == 2
    assert c.env["FOO"] == "a"
    assert c.args[c.args.index("--max-num-batched-tokens") + 1] == "256"
    assert "--disable-log-requests" in c.args
    assert "--disable-log-requests" not in cells[2].args  # False: flag omitted
    assert len({x.cell_id for x in cells}) == len(cells)


def test_per_request_flag_only_on_spec_cells():
    cells = expand(_study(serve={**_study().serve.model_dump(), "per_request_metrics": "summary"}), _ident)
    assert all("--per-request-spec-decode-metrics" in c.args for c in cells if not c.is_baseline)
    assert "--per-request-spec-decode-metrics" not in cells[-1].args  # vLLM refuses it without speculation


@pytest.mark.parametrize("mode, level", [("summary", "summary"), ("detailed", "detailed")])
def test_per_request_level_is_passed_through(mode, level):
    cells = expand(_study(serve={**_study().serve.model_dump(), "per_request_metrics": mode}), _ident)
    spec = [c for c in cells if not c.is_baseline]
    assert spec and all(c.args[c.args.index("--per-request-spec-decode-metrics") + 1] == level for c in spec)


def test_auto_asks_for_detailed_per_step_arrays_on_vllm_with_the_flag():

    cells = expand(_study(serve={**_study().serve.model_dump(), "per_request_metrics": "auto"}), _ident)
    spec = [c for c in cells if not c.is_baseline]
    if not supports_per_request_metrics(installed_vllm_version()):
        assert all("--per-request-spec-decode-metrics" not in c.args for c in spec)
    else:
        assert all(c.args[c.args.index("--per-request-spec-decode-metrics") + 1] == "detailed" for c in spec)


@pytest.mark.slow
def test_dry_run_prints_every_cell_argv_and_redacted_env(tmp_path):
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data["serve"]["env"]["HF_TOKEN"] = "hf_supersecretvalue"
    data["serve"]["extra_args"] = ["--api-key", "sk-verysecret"]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    r = subprocess.run(
        [sys.executable, "-m", "specbench", "run", "--dry-run", str(cfg)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for cid in (
        "mla-on__output_norm-on__r0",
        "mla-off__output_norm-off__r0",
        "baseline__mla-on__r0",
        "baseline__mla-off__r0",
    ):
        assert f"[{cid}]" in out
    assert out.count("argv: ") == 8
    assert "VLLM_MLA_DISABLE=1" in out and "SPECBENCH_OUTPUT_NORM=off" in out
    assert "hf_supersecretvalue" not in out and "sk-verysecret" not in out
    assert "HF_TOKEN=***" in out
    # The argv printed is the one the server would run: built by the server's own builder, a shared
    # server's by the runner's own (run/groups.py group_server: the switch extension included)
    from specbench.run.groups import group_cells, group_server

    for group in group_cells(expand(load_config(cfg)), "127.0.0.1", True):
        args = group_server(group, "127.0.0.1")[0] if len(group) > 1 else group[0].args
        line = "  argv: " + shlex.join(redact_argv(server_argv(args, "127.0.0.1", "<free port>"))) + "\n"
        assert line in out
    assert out.count("--worker-extension-cls") == 6  # the 6 speculative cells, on 2 switching servers


def test_default_config_expands_to_eight_cells():
    cells = expand(load_config(ROOT / "configs" / "default.yaml"), _ident)
    assert len(cells) == 8 and sum(c.is_baseline for c in cells) == 2


def test_legacy_expansion_reproduces_a_pre_per_target_baseline_run():
    """--resume of a run written before per-target baselines: the manifest of the default-study run
    committed until 2026-12-03 (4 spec cells + ``baseline__r0``), kept for this test."""
    manifest = json.loads((Path(__file__).parent / "data" / "legacy-default-manifest.json").read_text())
    study = parse_study(manifest["resolved_config"], "manifest")
    assert [c.cell_id for c in expand(study, _ident)] != manifest["cells"]
    legacy = expand(study, _ident, legacy_baseline=True)
    assert [c.cell_id for c in legacy] == manifest["cells"]
    assert legacy[-1].axes == {"mla": "on", "output_norm": "none"} and legacy[-1].env["VLLM_MLA_DISABLE"] == "0"


def test_draft_axes_are_read_from_a_run_manifest():

    def manifest(baseline: dict) -> Manifest:
        return Manifest(run_id="r", cells=[], resolved_config={"baseline": baseline})

    assert draft_axes_of(manifest({"enabled": True, "draft_axes": ["env:D"]})) == ["env:D"]
    assert draft_axes_of(manifest({"enabled": True})) == []  # an older run
    assert draft_axes_of(None) == []

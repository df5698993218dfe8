"""Load axes: validation, cell expansion, server groups and per-cell load (no vLLM here; the real
one-server run is tests/run/test_groups_vllm.py)."""

from __future__ import annotations

import dataclasses

import pytest

from specbench.config import parse_study
from specbench.config.study_checks import check_prompts
from specbench.errors import ConfigError
from specbench.load.prompt_sets import load_prompts
from specbench.records.baseline import pick_baseline
from specbench.run.cells import expand
from specbench.run.display import QuietDisplay
from specbench.run.groups import cell_context, configured_method, group_cells, head_variant, load_settings, shipped_env
from specbench.run.runner import RunContext


def _study(matrix, **over):
    data = {
        "name": "t",
        "serve": {"model": "org/m", "speculative": {"draft": "org/d"}, "per_request_metrics": "off"},
        "matrix": matrix,
        **over,
    }
    return parse_study(data, "s.yaml")


@pytest.mark.parametrize(
    "matrix, message",
    [
        ({"load:concurrency": [0]}, "s.yaml: matrix.load:concurrency[0]: must be a positive integer"),
        ({"load:concurrency": [2, True]}, "s.yaml: matrix.load:concurrency[1]: must be a positive integer"),
        ({"load:max_tokens": [1.5]}, "s.yaml: matrix.load:max_tokens[0]: must be a positive integer"),
        ({"load:temperature": [-1]}, "s.yaml: matrix.load:temperature[0]: must be a number from 0 to 100"),
        ({"load:category": ["chat", "poetry"]}, "s.yaml: matrix.load:category[1]: unknown prompt category 'poetry'"),
        ({"load:request_rate": [1]}, "unknown load axis 'load:request_rate'; use one of load:concurrency"),
        ({"load:concurrency": [1, 1]}, "s.yaml: matrix.load:concurrency: values repeat"),
    ],
)
def test_bad_load_axes_are_one_line_errors(matrix, message):
    with pytest.raises(ConfigError) as err:
        _study(matrix)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_category_axis_refuses_a_second_source_of_categories():
    with pytest.raises(ConfigError, match="either as this axis or in load.prompts.categories"):
        _study({"load:category": ["chat"]}, load={"prompts": {"categories": ["code"]}})


def test_cells_differing_only_in_load_share_a_group_baselines_too():
    study = _study({"mla": ["on", "off"], "load:concurrency": [1, 2, 4]}, baseline=True)
    cells = expand(study)
    ids = [c.cell_id for c in cells]
    assert "mla-on__concurrency-4__r0" in ids and "baseline__mla-off__concurrency-2__r0" in ids
    groups = group_cells(cells)
    assert [[c.load["concurrency"] for c in g] for g in groups] == [[1, 2, 4]] * 4
    assert [(g[0].is_baseline, g[0].axes["mla"]) for g in groups] == [
        (False, "on"),
        (False, "off"),
        (True, "on"),
        (True, "off"),
    ]
    # a group's cells need the same server: same argv and env
    for g in groups:
        assert len({tuple(c.args) for c in g}) == 1 and len({tuple(sorted(c.env.items())) for c in g}) == 1
    # load axes set nothing on the server
    assert not any("concurrency" in " ".join(c.args) or "concurrency" in str(c.env) for c in cells)


def test_speedup_pairs_each_cell_with_the_baseline_at_its_concurrency():
    cells = expand(_study({"load:concurrency": [1, 4]}, baseline=True))
    bases = [(c.axes, c.repeat, c.cell_id) for c in cells if c.is_baseline]
    spec = [c for c in cells if not c.is_baseline]
    assert [pick_baseline(c.axes, 0, bases) for c in spec] == [
        "baseline__concurrency-1__r0",
        "baseline__concurrency-4__r0",
    ]


def test_repeats_and_other_axes_keep_their_own_servers():
    cells = expand(_study({"env:FOO": ["a", "b"], "load:max_tokens": [8, 16]}, repeats=2))
    assert len(cells) == 8
    groups = group_cells(cells)
    assert len(groups) == 4 and all(len(g) == 2 for g in groups)
    assert all(len({(c.repeat, c.env["FOO"]) for c in g}) == 1 for g in groups)


def test_no_load_axis_one_cell_per_group():
    cells = expand(_study({"mla": ["on", "off"]}, baseline=True))
    assert [len(g) for g in group_cells(cells)] == [1] * len(cells)


def test_cell_context_applies_the_cell_load_and_narrows_prompts(tmp_path):
    study = _study({"load:category": ["code", "math"], "load:concurrency": [1, 8]})
    ctx = RunContext(study=study, run_dir=tmp_path, prompts=load_prompts(), display=QuietDisplay())
    cell = next(c for c in expand(study) if c.load == {"category": "math", "concurrency": 8})
    cctx = cell_context(ctx, cell)
    assert cctx.study.load.concurrency == 8 and cctx.study.load.warmup_requests == study.load.warmup_requests
    assert {p.category for p in cctx.prompts} == {"math"}
    assert load_settings(cctx.study.load).category == "math"
    later = cell_context(ctx, cell, warmup=False)  # a group's later cells: warmup once per server
    assert later.study.load.warmup_requests == 0
    assert study.load.concurrency == 4  # the study itself is untouched


def test_category_missing_from_the_users_prompt_file_fails_before_the_run(tmp_path):

    f = tmp_path / "p.jsonl"
    f.write_text('{"category": "chat", "prompt": "hi"}\n')
    study = _study({"load:category": ["chat", "code"]}, load={"prompts": {"path": str(f)}})
    with pytest.raises(ConfigError, match=r"s.yaml: matrix.load:category\[1\]: no prompts of category 'code'"):
        check_prompts(study, "s.yaml")


@pytest.mark.heavy
def test_dry_run_says_how_many_servers(tmp_path):
    import subprocess
    import sys

    import yaml

    cfg = tmp_path / "s.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "serve": {"model": "org/m", "per_request_metrics": "off"},
                "matrix": {"mla": ["on", "off"], "load:concurrency": [1, 2, 4]},
            }
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg), "--dry-run"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert (
        "6 cells (6 speculative, 0 baseline) on 2 server(s) = 2 cold start(s)" in out.stdout
        and 'load={"concurrency": 4}' in out.stdout
    )


# Head variants switched in place (plugin/switch.py; the real proof is tests/serve/plugin/test_switch_vllm.py).


def _variant_study(matrix, eager=True, host="127.0.0.1", share=True, method="eagle", baseline=True):
    serve = {
        "model": "org/m",
        "speculative": {"draft": "org/d", "method": method},
        "per_request_metrics": "off",
        "enforce_eager": eager,
        "host": host,
        "share_servers": share,
    }
    return parse_study({"name": "t", "serve": serve, "matrix": matrix, "baseline": baseline}, "s.yaml")


def test_head_variants_of_an_eager_eagle_server_share_it():
    study = _variant_study(
        {"mla": ["on", "off"], "output_norm": ["on", "logits-only", "off"], "env:SPECBENCH_POS0_MASK": ["off", "on"]}
    )
    groups = group_cells(expand(study), study.serve.host)
    spec = [g for g in groups if not g[0].is_baseline]
    assert len(spec) == 2 and all(len(g) == 6 for g in spec)  # one server per MLA value
    assert all(len(g) == 1 for g in groups if g[0].is_baseline)  # no variant to switch: one each
    for g in spec:
        assert len({c.axes["mla"] for c in g}) == 1
        assert {head_variant(c) for c in g} == {(n, m) for n in ("on", "logits-only", "off") for m in (False, True)}
        # the shared server starts as shipped: the variant selectors are not in its environment
        assert all(not set(shipped_env(c.env)) & {"SPECBENCH_OUTPUT_NORM", "SPECBENCH_POS0_MASK"} for c in g)


@pytest.mark.parametrize("over", [{}, {"eager": False}, {"method": "deepseek_mtp"}, {"method": "mtp", "eager": False}])
def test_head_variants_share_a_server_compiled_or_not_eagle_or_mtp(over):
    """The plan is optimistic in every compile mode and for both DeepSeek heads (the variants are
    data in the module); the runner's start-up probe falls back to a server each (run/groups.py)."""
    study = _variant_study({"output_norm": ["on", "off"], "pos0_mask": ["off", "on"]}, baseline=False, **over)
    cells = expand(study)
    assert [len(g) for g in group_cells(cells, study.serve.host, study.serve.share_servers)] == [4]


@pytest.mark.parametrize("over", [{"host": "0.0.0.0"}, {"share": False}, {"method": "ngram"}])
def test_head_variants_keep_their_own_servers_where_a_switch_is_not_safe_or_not_ours(over):
    """dev-mode RPC must not face the network; share_servers: false asks for one server per cell;
    a method without a DeepSeek head has nothing the plugin could switch."""
    study = _variant_study({"output_norm": ["on", "off"]}, baseline=False, **over)
    cells = expand(study)
    assert [len(g) for g in group_cells(cells, study.serve.host, study.serve.share_servers)] == [1, 1]


@pytest.mark.parametrize("over", [{"eager": False}, {"method": "deepseek_mtp"}])
def test_head_variants_of_compiled_and_mtp_servers_share_one(over):
    """The variants are data in the compiled graph (plugin/select.py), on both heads: the plan is
    optimistic, the runner's probe confirms once the server is up."""
    study = _variant_study({"output_norm": ["on", "off"]}, baseline=False, **over)
    assert [len(g) for g in group_cells(expand(study), study.serve.host, study.serve.share_servers)] == [2]


def test_the_control_variant_keeps_its_own_server():
    """SPECBENCH_HEAD_CONTROL=1 registers the re-implemented forward at start-up by design: a
    control cell never shares a server with the variants it controls for."""
    study = _variant_study(
        {"output_norm": ["on", "off"], "env:SPECBENCH_HEAD_CONTROL": ["0", "1"]}, baseline=False, eager=False
    )
    groups = group_cells(expand(study), study.serve.host)
    controls = [g for g in groups if g[0].env.get("SPECBENCH_HEAD_CONTROL") == "1"]
    assert sorted(len(g) for g in groups) == [1, 1, 2] and [len(g) for g in controls] == [1, 1]


def test_the_variant_enacted_follows_the_server_configuration_not_the_claim():
    """An EAGLE server's cell that claims an MTP method (a wrong claim, which attestation fails) is
    still switched to the EAGLE head's shipped mask, not to the MTP head's: the switch enacts what the
    server is configured with; the claim is only checked."""
    import copy

    study = _variant_study({"mla": ["on", "off"]}, baseline=False)  # no switch in the env: no SPECBENCH_HEAD
    honest = expand(study)[0]
    assert "SPECBENCH_HEAD" not in honest.env
    claim = dataclasses.replace(honest, spec=copy.deepcopy(honest.spec).with_(method="deepseek_mtp", vllm_method="mtp"))
    assert configured_method(claim) == "eagle"
    assert head_variant(claim) == head_variant(honest) == ("on", False)

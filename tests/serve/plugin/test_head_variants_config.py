"""configs/head_variants.yaml and head_variants_mtp.yaml expand to the cells the study needs, and a bad switch fails before launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.config import load_config, parse_study
from specbench.errors import ConfigError
from specbench.fixtures import resolve_fixture_ref
from specbench.run.cells import expand
from specbench.run.plan import check_cells

ROOT = Path(__file__).resolve().parents[3]


def test_eagle_study_crosses_output_norm_with_the_pos0_mask():
    cells = expand(load_config(ROOT / "configs" / "head_variants.yaml"))
    combos = {(c.env["SPECBENCH_OUTPUT_NORM"], c.env["SPECBENCH_POS0_MASK"]) for c in cells}
    assert combos == {(n, m) for n in ("on", "logits-only", "off") for m in ("off", "on")}
    assert all(c.draft == resolve_fixture_ref("fixture:heads-draft") for c in cells)
    check_cells(cells)  # accepted: a DeepSeek-V3 head (or, not built yet, checked inside the server)


def test_mtp_study_drafts_with_the_targets_own_layer():
    (cell,) = expand(load_config(ROOT / "configs" / "head_variants_mtp.yaml"))
    spec = json.loads(cell.args[cell.args.index("--speculative-config") + 1])
    target = resolve_fixture_ref("fixture:heads-target")
    # the config says deepseek_mtp; vLLM is passed the name it runs it as (0.32 renames it, warning)
    assert spec == {"method": "mtp", "model": target, "num_speculative_tokens": 3}
    assert (cell.spec.method, cell.spec.vllm_method) == ("deepseek_mtp", "mtp")
    assert cell.args[0] == target and "SPECBENCH_OUTPUT_NORM" not in cell.env


def test_unknown_pos0_mask_value_is_a_config_error_before_launch():
    study = parse_study(
        {
            "name": "x",
            "serve": {
                "model": "fixture:heads-target",
                "speculative": {"method": "eagle", "draft": "fixture:heads-draft"},
            },
            "matrix": {"env:SPECBENCH_POS0_MASK": ["off", "yes"]},
        },
        "x.yaml",
    )
    with pytest.raises(ConfigError, match=r"SPECBENCH_POS0_MASK='yes'.*off, on"):
        check_cells(expand(study))


def test_seed_questions_cross_method_output_norm_and_pos0_mask():
    cells = expand(load_config(ROOT / "configs" / "seed-questions.yaml"))
    spec = [c for c in cells if not c.is_baseline]
    target, head = resolve_fixture_ref("fixture:heads-target"), resolve_fixture_ref("fixture:heads-draft")
    seen = set()
    for c in spec:
        method, norm, mask = c.axes["method"], c.axes["output_norm"], c.axes["pos0_mask"]
        assert c.cell_id == f"method-{method}__output_norm-{norm}__pos0_mask-{mask}__r0"
        conf = json.loads(c.args[c.args.index("--speculative-config") + 1])
        # the MTP cells draft with the served model's own layer, the EAGLE cells with the head
        assert conf["method"] == {"eagle": "eagle", "deepseek_mtp": "mtp"}[method] and conf["model"] == (
            target if method == "deepseek_mtp" else head
        )
        assert (c.env["SPECBENCH_HEAD"], c.env["SPECBENCH_OUTPUT_NORM"], c.env["SPECBENCH_POS0_MASK"]) == (
            {"eagle": "eagle", "deepseek_mtp": "mtp"}[method],
            norm,
            mask,
        )
        assert c.spec.head_variant.dump() == {"output_norm": norm, "pos0_mask": mask, "control": False}
        seen.add((method, norm, mask))
    assert len(seen) == len(spec) == 12
    (base,) = [c for c in cells if c.is_baseline]
    # a baseline sets no head switch; only the attestation line is asked for
    assert "--speculative-config" not in base.args
    assert [k for k in base.env if k.startswith("SPECBENCH_")] == ["SPECBENCH_ATTEST"]
    check_cells(cells)


@pytest.mark.slow
def test_bad_switch_in_a_config_exits_2_before_anything_runs(tmp_path):
    """``specbench run`` on a config whose serve.env holds an unknown value: exit 2, one line, no run dir."""
    import subprocess
    import sys

    import yaml

    data = yaml.safe_load((ROOT / "configs" / "head_variants_mtp.yaml").read_text())
    data["serve"]["env"]["SPECBENCH_OUTPUT_NORM"] = "OFF"
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(data))
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(config), "--results-dir", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "bad.yaml: SPECBENCH_OUTPUT_NORM='OFF' is not a known output-norm variant" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r").exists()
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "validate", str(config)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "SPECBENCH_OUTPUT_NORM='OFF'" in proc.stderr


def test_mtp_method_needs_no_draft_and_other_methods_do():
    base = {"name": "x", "serve": {"model": "fixture:heads-target", "speculative": {"method": "deepseek_mtp"}}}
    (cell,) = expand(parse_study(base, "x.yaml"))
    assert json.loads(cell.args[cell.args.index("--speculative-config") + 1])["model"] == resolve_fixture_ref(
        "fixture:heads-target"
    )
    with pytest.raises(ConfigError, match=r"x.yaml: matrix.method: 'eagle' needs serve.speculative.draft"):
        parse_study({**base, "matrix": {"method": ["deepseek_mtp", "eagle"]}}, "x.yaml")
    both = {
        "name": "x",
        "serve": {"model": "fixture:heads-target", "speculative": {"method": "eagle", "draft": "fixture:heads-draft"}},
        "matrix": {"method": ["eagle", "deepseek_mtp"], "draft": ["fixture:heads-draft", "fixture:draft"]},
    }
    with pytest.raises(ConfigError, match=r"matrix.draft: an MTP method drafts with the served model's own layer"):
        parse_study(both, "x.yaml")
    with pytest.raises(ConfigError, match=r"matrix.method\[0\]: must be a vLLM speculative method name"):
        parse_study({**base, "matrix": {"method": ["Eagle 3"]}}, "x.yaml")


def test_pos0_mask_axis_and_its_env_axis_collide():
    study = {
        "name": "x",
        "serve": {"model": "fixture:heads-target", "speculative": {"method": "eagle", "draft": "fixture:heads-draft"}},
        "matrix": {"pos0_mask": ["off", "on"], "env:SPECBENCH_POS0_MASK": ["off"]},
    }
    with pytest.raises(ConfigError, match=r"matrix.env:SPECBENCH_POS0_MASK: collides with matrix.pos0_mask"):
        load_config_data(study)


def load_config_data(data):
    from specbench.config.study_checks import check_study

    check_study(parse_study(data, "x.yaml"), "x.yaml")


@pytest.mark.parametrize(
    ("config", "method", "named"),
    [
        ({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32"}, "mtp", "DeepseekV32MTP"),
        (
            {"architectures": ["Eagle3DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"},
            "eagle",
            "Eagle3DeepseekV2ForCausalLM",
        ),
    ],
)
def test_deepseek_heads_with_their_own_class_are_refused_by_name(tmp_path, config, method, named):
    """V3.2's MTP and EAGLE-3 heads (vLLM classes of their own, registry.py 0.31-0.34): one refusal
    that names the class and what is supported, not "not a DeepSeek-V3 head"."""
    from specbench.serve.plugin import check_variant_supported

    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as err:
        check_variant_supported(tmp_path, "off", method=method)
    text = str(err.value)
    assert named in text and "supported: the DeepSeek-V3 EAGLE head" in text and "config.json" in text


def test_method_eagle3_with_a_switch_is_refused_by_name():
    from specbench.serve.plugin import check_variant_supported

    with pytest.raises(ConfigError, match=r"not supported for method 'eagle3': an EAGLE-3 DeepSeek head"):
        check_variant_supported(None, "logits-only", method="eagle3")

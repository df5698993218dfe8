"""configs/head_variants*.yaml expand to the cells the study needs, and a bad switch fails before launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.config import load_config, parse_study
from specbench.errors import ConfigError
from specbench.fixtures import resolve_fixture_ref
from specbench.run.cells import expand
from specbench.run.plan import check_cells

ROOT = Path(__file__).resolve().parents[2]


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
    assert spec == {"method": "deepseek_mtp", "model": target, "num_speculative_tokens": 3}
    assert cell.args[0] == target and "SPECBENCH_OUTPUT_NORM" not in cell.env


def test_unknown_pos0_mask_value_is_a_config_error_before_launch():
    study = parse_study({
        "name": "x", "serve": {"model": "fixture:heads-target",
                               "speculative": {"method": "eagle", "draft": "fixture:heads-draft"}},
        "matrix": {"env:SPECBENCH_POS0_MASK": ["off", "yes"]},
    }, "x.yaml")
    with pytest.raises(ConfigError, match=r"SPECBENCH_POS0_MASK='yes'.*off, on"):
        check_cells(expand(study))


def test_head_switches_on_an_mtp_cell_are_refused_not_ignored():
    config = ROOT / "configs" / "head_variants_mtp.yaml"
    import yaml

    data = yaml.safe_load(config.read_text())
    data["matrix"] = {"output_norm": ["logits-only"]}
    cells = expand(parse_study(data, str(config)))
    resolve_fixture_ref("fixture:heads-target", build=True)  # the check reads the draft's config.json
    with pytest.raises(ConfigError, match=r"output_norm 'logits-only' switches the DeepSeek EAGLE head.*'deepseek_mtp'"):
        check_cells(cells)

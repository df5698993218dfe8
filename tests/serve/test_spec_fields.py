"""serve.speculative passes any field of the installed vLLM's SpeculativeConfig through, checked
at validation: names against the install's own class (read from its source), synthetic values as
vLLM checks them; ``speculative:FIELD`` axes label cells and land in the one --speculative-config."""

from __future__ import annotations

import json

import pytest

from specbench.config import parse_study
from specbench.errors import ConfigError
from specbench.records.baseline import is_target_axis
from specbench.run.cells import expand
from specbench.serve.plugin.synthetic import SYNTHETIC_VAR
from specbench.serve.spec_fields import current_vllm_root, speculative_fields, synthetic_problem, unknown_field

FIELDS = speculative_fields(current_vllm_root())
NEEDS_VLLM = pytest.mark.skipif(FIELDS is None, reason="no vLLM installed")


def _study(spec: dict | None = None, matrix: dict | None = None):
    speculative = {"method": "eagle", "draft": "fixture:heads-draft", "num_speculative_tokens": 3, **(spec or {})}
    data = {"name": "t", "serve": {"model": "fixture:heads-target", "speculative": speculative}, "baseline": True}
    return parse_study({**data, "matrix": matrix or {}}, "x.yaml")


def _error(spec: dict | None = None, matrix: dict | None = None) -> str:
    with pytest.raises(ConfigError) as exc:
        _study(spec, matrix)
    assert "\n" not in str(exc.value)
    return str(exc.value)


@NEEDS_VLLM
def test_the_installed_class_s_fields_are_read_without_its_internal_objects() -> None:
    assert {"rejection_sample_method", "synthetic_acceptance_rates", "parallel_drafting"} <= FIELDS
    assert {
        "draft_tensor_parallel_size",
        "num_speculative_tokens_per_batch_size",
        "disable_padded_drafter_batch",
    } <= FIELDS
    assert "target_model_config" not in FIELDS and "draft_parallel_config" not in FIELDS  # vLLM fills those


@NEEDS_VLLM
def test_a_misspelt_field_names_the_field_and_the_nearest_real_one() -> None:
    msg = _error({"rejection_sampl_method": "synthetic"})
    assert msg.startswith("x.yaml: serve.speculative.rejection_sampl_method: ")
    assert "did you mean 'rejection_sample_method'?" in msg
    msg = _error(matrix={"speculative:synthetic_acceptance_lenght": [2.0]})
    assert "matrix.speculative:synthetic_acceptance_lenght" in msg and "'synthetic_acceptance_length'" in msg
    assert "serve.speculative.draft" in unknown_field(["model"], FIELDS)


@NEEDS_VLLM
@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"synthetic_acceptance_rates": [0.9, 0.95, 0.3]}, "synthetic_acceptance_rates", "non-increasing"),
        ({"synthetic_acceptance_rates": [1.2, 0.5, 0.3]}, "synthetic_acceptance_rates", "[0, 1]"),
        ({"synthetic_acceptance_rates": [0.9, 0.5]}, "synthetic_acceptance_rates", "one rate per speculative token (3)"),
        ({"synthetic_acceptance_length": 4.5}, "synthetic_acceptance_length", "[1, 4]"),
        ({"synthetic_acceptance_length": 0.5}, "synthetic_acceptance_length", "[1, 4]"),
        ({"synthetic_acceptance_length": 2.0, "synthetic_acceptance_rates": [0.5] * 3}, "synthetic_acceptance_rates", "exactly one"),
        ({}, "rejection_sample_method", "exactly one"),
    ],
)  # fmt: skip
def test_bad_synthetic_values_are_refused_naming_the_field(spec: dict, field: str, words: str) -> None:
    msg = _error({"rejection_sample_method": "synthetic", **spec})
    assert f"serve.speculative.{field}: " in msg and words in msg, msg


@NEEDS_VLLM
def test_synthetic_values_need_synthetic_and_are_checked_at_every_k() -> None:
    assert "only valid with rejection_sample_method 'synthetic'" in _error({"synthetic_acceptance_length": 2.0})
    msg = _error({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 3.5},
                 matrix={"num_speculative_tokens": [3, 2]})  # fmt: skip
    assert "[1, 3]" in msg and "(num_speculative_tokens 2)" in msg
    assert synthetic_problem({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 4}, 3) is None


@NEEDS_VLLM
def test_a_speculative_axis_labels_cells_and_lands_in_the_one_speculative_config() -> None:
    study = _study(
        {"rejection_sample_method": "synthetic", "disable_padded_drafter_batch": True},
        {"speculative:synthetic_acceptance_rates": [[0.9, 0.6, 0.3], [0.5, 0.2, 0.1]]},
    )
    cells = expand(study)
    assert [c.cell_id for c in cells] == [
        "synthetic_acceptance_rates-0.9_0.6_0.3__r0",
        "synthetic_acceptance_rates-0.5_0.2_0.1__r0",
        "baseline__r0",  # a draft-only axis: one baseline
    ]
    spec_json = [json.loads(c.args[c.args.index("--speculative-config") + 1]) for c in cells[:2]]
    assert spec_json[0]["synthetic_acceptance_rates"] == [0.9, 0.6, 0.3]
    assert spec_json[1] == {**spec_json[0], "synthetic_acceptance_rates": [0.5, 0.2, 0.1]}
    assert spec_json[0]["rejection_sample_method"] == "synthetic" and spec_json[0]["disable_padded_drafter_batch"]
    assert cells[0].axes == {"speculative:synthetic_acceptance_rates": "[0.9,0.6,0.3]"}
    assert cells[0].env[SYNTHETIC_VAR] == "1" and SYNTHETIC_VAR not in cells[2].env
    assert "--speculative-config" not in cells[2].args
    assert cells[0].spec.rejection_sample_method == "synthetic" and cells[2].spec.rejection_sample_method is None
    assert not is_target_axis("speculative:synthetic_acceptance_rates")


@NEEDS_VLLM
def test_a_schedule_axis_serves_each_value_and_null_leaves_the_field_unset() -> None:
    """A dynamic-K schedule (a list of [start, end, K] lists) is an axis value, and null is the
    field left out of the cell's --speculative-config (vLLM's default: static k)."""
    schedule = [[1, 1, 3], [2, 4, 0]]
    study = _study(matrix={"speculative:num_speculative_tokens_per_batch_size": [None, schedule]})
    cells = expand(study)
    assert [c.cell_id for c in cells] == [
        "num_speculative_tokens_per_batch_size-unset__r0",
        "num_speculative_tokens_per_batch_size-1_1_3-2_4_0__r0",
        "baseline__r0",
    ]
    spec_json = [json.loads(c.args[c.args.index("--speculative-config") + 1]) for c in cells[:2]]
    assert "num_speculative_tokens_per_batch_size" not in spec_json[0]
    assert spec_json[1] == {**spec_json[0], "num_speculative_tokens_per_batch_size": schedule}
    assert cells[0].axes == {"speculative:num_speculative_tokens_per_batch_size": "unset"}
    assert cells[1].axes == {"speculative:num_speculative_tokens_per_batch_size": "[[1,1,3],[2,4,0]]"}
    assert "null is a value of a speculative: axis only" in _error(matrix={"flag:--x": [None]})
    assert "a list of such lists (a schedule)" in _error(
        matrix={"speculative:num_speculative_tokens_per_batch_size": [[[[1, 1, 3]]]]}
    )


@NEEDS_VLLM
def test_a_field_set_twice_and_a_list_on_another_axis_are_refused() -> None:
    msg = _error({"rejection_sample_method": "synthetic"}, {"speculative:rejection_sample_method": ["standard"]})
    assert "matrix.speculative:rejection_sample_method: serve.speculative.rejection_sample_method is set too" in msg
    assert "a list is a value of a speculative: axis only" in _error(matrix={"flag:--x": [[1, 2]]})
    assert "use the 'num_speculative_tokens' axis" in _error(matrix={"speculative:num_speculative_tokens": [2]})


@pytest.mark.slow
@pytest.mark.imports_vllm
@pytest.mark.parametrize("k", [1, 3])
def test_the_synthetic_checks_refuse_what_vllm_s_own_check_refuses(k: int) -> None:
    from vllm.config.speculative import SpeculativeConfig

    cases = [[0.9] * k, [1.0] * k, [0.0] * k, [0.5] * (k + 1), [1.01] * k, [-0.1] * k, [0.3] * (k - 1) + [0.4]]
    lengths = [1.0, 0.99, k + 1.0, k + 1.01, 2.5]
    for rates, length in [(r, None) for r in cases] + [(None, n) for n in lengths] + [(None, None), ([0.5] * k, 2.0)]:
        try:
            SpeculativeConfig._resolve_synthetic_acceptance_rates(k, rates, length)
            vllm_ok = True
        except ValueError:
            vllm_ok = False
        fields = {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": rates}
        ours = synthetic_problem({**fields, "synthetic_acceptance_length": length}, k)
        assert (ours is None) == vllm_ok, (rates, length, ours)

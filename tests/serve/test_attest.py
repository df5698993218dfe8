"""specbench/serve/attest.py: what vLLM says it ran, read from real logs and from the format strings of
GPU vLLM 0.31-0.34 (read in the released wheels; the file:line of each is given beside it), and
specbench/records/attestation.py's checks of it against the claim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.records import attestation
from specbench.records.cell import Attested, Spec
from specbench.serve import attest as attest_mod
from specbench.serve.attest import ATTEST_PREFIX, backend_lines, engine_config


# The tests write claims and records as cell.json holds them (JSON objects); the checks take the
# typed records (specbench/records/cell.py), so each call goes through the model as a loaded file does.
def attest(text: str, switched: list | None = None) -> dict:
    return attest_mod.attest(text, switched).dump()


def _typed(cls, d):
    return None if d is None else cls.model_validate(d)


def mismatches(spec: dict | None, attested: dict | None) -> list[str]:
    return attestation.mismatches(_typed(Spec, spec), _typed(Attested, attested))


def not_attested(attested: dict | None, *fields: str) -> list[str]:
    return attestation.not_attested(_typed(Attested, attested), *fields)


def confounds(a: dict | None, b: dict | None, axis_fields=()) -> list[str]:
    return attestation.confounds(_typed(Attested, a), _typed(Attested, b), axis_fields)


ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "results" / "baselines" / "cpu-default"
PREFIX = "(EngineCore pid=123) INFO 12-03 16:01:53 "


def _log(cell: str, plugin: bool = False) -> str:
    """A committed cell's server log; without the plugin's lines unless ``plugin``: what vLLM alone printed."""
    text = (DEFAULT / cell / "server.log").read_text(encoding="utf-8", errors="replace")
    return text if plugin else "".join(ln for ln in text.splitlines(keepends=True) if ATTEST_PREFIX not in ln)


# vllm/platforms/cuda.py (0.31:526, 0.32:506, 0.33:508, 0.34:549), byte-identical in 0.31-0.34:
#   logger.info_once("Using %s attention backend out of potential backends: %s.", selected_backend.name, "[...]")
GPU_AUTO = "Using %s attention backend out of potential backends: %s."
# vllm/platforms/cuda.py (0.31:466, 0.32:446, 0.33:448, 0.34:489), with --attention-backend:
#   logger.info("Using %s backend.", selected_backend)  -- the enum itself, no __str__ override
GPU_EXPLICIT = "Using %s backend."
# vllm/platforms/cpu.py (0.32:175): logger.info_once("Using %s backend.", AttentionBackendEnum.CPU_MLA.name)


@pytest.mark.parametrize(
    "line, name, mla",
    [
        (
            GPU_AUTO % ("FLASH_ATTN_MLA", "['FLASH_ATTN_MLA', 'FLASHMLA', 'FLASHINFER_MLA', 'TRITON_MLA']"),
            "FLASH_ATTN_MLA",
            True,
        ),
        (
            GPU_AUTO % ("FLASH_ATTN", "['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']"),
            "FLASH_ATTN",
            False,
        ),
        (GPU_EXPLICIT % "AttentionBackendEnum.FLASHMLA", "FLASHMLA", True),
        (GPU_EXPLICIT % "AttentionBackendEnum.TRITON_ATTN", "TRITON_ATTN", False),
        (GPU_EXPLICIT % "CPU_MLA", "CPU_MLA", True),
    ],
)
def test_backend_lines_of_cpu_and_gpu_vllm(line, name, mla):
    text = f"{PREFIX}[cuda.py:506] {line}\n"
    assert backend_lines(text) == [name]
    a = attest(text)  # no plugin line: MLA from the backend vLLM printed
    assert (a["attention_backend"], a["mla"]) == (name, mla)


def test_mla_prefill_and_vit_lines_are_not_the_attention_backend():
    text = (
        f"{PREFIX}[selector.py:131] Using CPU_SDPA_MLA MLA prefill backend.\n"
        f"{PREFIX}[layer.py:10] Using backend FLASH_ATTN for vit attention\n"
    )
    assert backend_lines(text) == []


def test_committed_cpu_logs_mla_on_prints_the_backend_mla_off_prints_none():
    on, off = attest(_log("mla-on__output_norm-on__r0")), attest(_log("mla-off__output_norm-on__r0"))
    assert on["attention_backend"] == "CPU_MLA" and on["mla"] is True
    # vLLM-CPU prints no backend line with MLA off: the log alone cannot prove it, so it says why
    assert off["mla"] is None and "no attention backend line" in off["unattested"]["mla"]
    # the plugin's worker line (model_config.use_mla) attests it, and names the backend vLLM built
    off = attest(_log("mla-off__output_norm-on__r0", plugin=True))
    assert off["mla"] is False and off["attention_backend"] == "CPU_ATTN" and off["workers"] == 1


def test_engine_line_of_a_real_cpu_server():
    spec, base = engine_config(_log("mla-on__output_norm-on__r0")), engine_config(_log("baseline__mla-off__r0"))
    assert spec["vllm_version"] == "0.32.0" and spec["speculation"] is True
    assert (spec["spec_method"], spec["num_speculative_tokens"]) == ("eagle", 3)
    assert spec["draft_model"].endswith("/draft")
    # cpu.py forces both off with MLA on; the MLA-off baseline keeps vLLM's defaults
    assert (spec["chunked_prefill"], spec["prefix_caching"]) == (False, False)
    assert (base["chunked_prefill"], base["prefix_caching"], base["speculation"]) == (True, True, False)
    assert spec["compilation"] == {"mode": "NONE", "cudagraph_mode": "NONE", "enforce_eager": True}
    assert (spec["tp"], spec["dp"]) == (1, 1)


def test_engine_line_of_gpu_vllm_compiled_with_cuda_graphs():
    # vllm/v1/engine/core.py (0.32:133) "Initializing a V1 LLM engine (v%s) with config: %s" with
    # VllmConfig.__str__ (config/vllm.py, byte-identical 0.31-0.34): the fields read here, in its order
    cfg = (
        "model='deepseek-ai/DeepSeek-R1', speculative_config=SpeculativeConfig(method='mtp', "
        "model='deepseek-ai/DeepSeek-R1', num_spec_tokens=1), tokenizer='deepseek-ai/DeepSeek-R1', "
        "tensor_parallel_size=8, pipeline_parallel_size=1, data_parallel_size=1, enforce_eager=False, "
        "enable_prefix_caching=True, enable_chunked_prefill=True, pooler_config=None, "
        "compilation_config={'mode': <CompilationMode.VLLM_COMPILE: 3>, 'cudagraph_mode': "
        "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'cudagraph_num_of_warmups': 1}"
    )
    text = f"{PREFIX}[core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: {cfg}\n"
    e = engine_config(text)
    assert (e["spec_method"], e["num_speculative_tokens"], e["tp"], e["dp"]) == ("mtp", 1, 8, 1)
    assert e["compilation"] == {"mode": "VLLM_COMPILE", "cudagraph_mode": "FULL_AND_PIECEWISE", "enforce_eager": False}


def _worker(rank: int, **over) -> dict:
    w = {
        "rank": rank,
        "dp_rank": 0,
        "runner": "vllm.v1.worker.gpu.model_runner.GPUModelRunner",
        "use_mla": True,
        "target_attention": ["FLASHMLA"],
        "method": "eagle",
        "num_speculative_tokens": 3,
        "draft_model": "/heads/eagle",
        "head_variant": {"output_norm": "on", "pos0_mask": "off", "control": False},
        "compilation": {"mode": "VLLM_COMPILE", "cudagraph_mode": "FULL_AND_PIECEWISE", "enforce_eager": False},
        "chunked_prefill": True,
        "prefix_caching": True,
        "tp": 8,
        "dp": 1,
    }
    return {**w, **over}


def _lines(*workers: dict) -> str:
    return "".join(
        f"(Worker_TP{w['rank']} pid={100 + w['rank']}) INFO 12-03 16:01:53 [attest.py:48] "
        f"{ATTEST_PREFIX}{json.dumps(w)}\n"
        for w in workers
    )


SPEC = {
    "method": "eagle",
    "vllm_method": "eagle",
    "draft_model": "/heads/eagle",
    "num_speculative_tokens": 3,
    "head_variant": {"output_norm": "on", "pos0_mask": "off", "control": False},
    "mla": True,
    "tp": 8,
    "dp": 1,
    "compiled": True,
}


def test_every_rank_agrees_and_matches_the_spec():
    a = attest(_lines(*(_worker(r) for r in range(8))))
    assert a["workers"] == 8 and a["mla"] is True and a["attention_backend"] == "FLASHMLA"
    assert a["model_runner"].endswith("gpu.model_runner.GPUModelRunner")
    assert mismatches(SPEC, a) == [] and not_attested(a) == []


@pytest.mark.parametrize(
    "field, asked, ran, expect",
    [
        ("mla", {"mla": False}, {}, "mla: asked for off, vLLM ran on"),
        (
            "method",
            {"method": "deepseek_mtp", "vllm_method": "mtp"},
            {},
            "spec_method: asked for 'mtp', vLLM ran 'eagle'",
        ),
        ("k", {"num_speculative_tokens": 2}, {}, "num_speculative_tokens: asked for 2, vLLM ran 3"),
        (
            "head",
            {"head_variant": {"output_norm": "off", "pos0_mask": "off", "control": False}},
            {},
            "head_variant.output_norm: asked for 'off', vLLM ran 'on'",
        ),
        ("tp", {}, {"tp": 4}, "tp: asked for 8, vLLM ran 4"),
        (
            "no speculation",
            {},
            {"method": None, "num_speculative_tokens": None, "head_variant": None},
            "spec_method: asked for 'eagle', vLLM ran no speculation",
        ),
    ],
)
def test_each_kind_of_mismatch_is_named(field, asked, ran, expect):
    a = attest(_lines(*(_worker(r, **ran) for r in range(2))))
    assert mismatches({**SPEC, **asked}, a) == [expect]


def test_deepseek_mtp_and_mtp_are_the_same_method():
    a = attest(_lines(_worker(0, method="mtp")))
    assert mismatches({**SPEC, "method": "deepseek_mtp", "vllm_method": "mtp"}, a) == []


def test_ranks_that_disagree_attest_nothing_and_say_why():
    a = attest(
        _lines(_worker(0), _worker(1, head_variant={"output_norm": "off", "pos0_mask": "off", "control": False}))
    )
    assert a["head_variant"] is None and "workers disagree" in a["unattested"]["head_variant"]
    assert mismatches({**SPEC, "head_variant": {"output_norm": "off"}}, a) == []  # unattested, not a mismatch
    assert not_attested(a) == ["head_variant"]


def test_plugin_and_engine_line_disagreeing_attest_nothing():
    engine = (
        f"{PREFIX}[core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='m', "
        "speculative_config=SpeculativeConfig(method='eagle', model='/heads/eagle', num_spec_tokens=2), "
        "tensor_parallel_size=8\n"
    )
    a = attest(engine + _lines(_worker(0)))
    assert a["num_speculative_tokens"] is None and "engine line says 2" in a["unattested"]["num_speculative_tokens"]


def test_switch_answers_supersede_the_variant_printed_at_load():
    answer = {"output_norm": "logits-only", "pos0_mask": "off", "control": False}
    a = attest(_lines(_worker(0), _worker(1)), switched=[answer, answer])
    assert a["head_variant"] == {**answer, "switched_in_place": True}
    partial = attest(_lines(_worker(0), _worker(1)), switched=[answer, "error"])
    assert partial["head_variant"] is None


def test_a_crash_before_the_backend_line_attests_nothing_and_guesses_nothing():
    text = _log("mla-on__output_norm-on__r0").split("Using CPU_MLA backend.")[0]
    a = attest(text)
    assert a["mla"] is None and a["attention_backend"] is None


def test_unknown_backend_is_kept_verbatim_with_mla_unknown_only_if_the_plugin_is_silent():
    text = f"{PREFIX}[cuda.py:506] " + GPU_AUTO % ("NEW_BACKEND_X", "['NEW_BACKEND_X']") + "\n"
    a = attest(text)
    assert (a["attention_backend"], a["mla"]) == ("NEW_BACKEND_X", None)
    sparse = attest(f"{PREFIX}[cuda.py:506] " + GPU_AUTO % ("FLASHMLA_SPARSE", "['FLASHMLA_SPARSE']") + "\n")
    assert sparse["mla"] is True


def test_confounds_of_the_committed_cpu_mla_contrast():
    on, off = attest(_log("mla-on__output_norm-on__r0")), attest(_log("baseline__mla-off__r0"))
    shown = confounds(on, off, axis_fields=("mla", "attention_backend"))
    assert "chunked_prefill off vs on" in shown and "prefix_caching off vs on" in shown


@pytest.mark.parametrize(
    "line, runner",
    [
        # vllm/v1/worker/gpu_worker.py (0.31:479, 0.32:518, 0.33:513): logger.info_once("Using V2 Model Runner")
        ("(EngineCore pid=7) INFO 12-03 16:01:53 [gpu_worker.py:518] Using V2 Model Runner", "V2"),
        # vllm/config/vllm.py (0.32:725) logger.warning_once, also printed by vLLM-CPU 0.32 (committed logs)
        (
            "(EngineCore pid=7) WARNING 12-03 16:01:53 [vllm.py:725] Model Runner V2 requires Triton; using the V1 model "
            "runner instead.",
            "V1",
        ),
        # vllm/config/vllm.py (0.32:732): "Model Runner V2 does not yet support %s; using the V1 model runner instead."
        (
            "(EngineCore pid=7) WARNING 12-03 16:01:53 [vllm.py:732] Model Runner V2 does not yet support suffix "
            "decoding; using the V1 model runner instead.",
            "V1",
        ),
    ],
)
def test_the_model_runner_vllm_says_it_uses(line, runner):
    assert attest(line + "\n")["runner_line"] == runner


def test_the_committed_cpu_log_says_v1_and_the_worker_names_the_cpu_runner():
    a = attest(_log("mla-on__output_norm-on__r0", plugin=True))
    assert a["runner_line"] == "V1" and a["model_runner"].endswith("cpu_model_runner.CPUModelRunner")


def test_a_backend_line_contradicting_the_workers_mla_attests_nothing():
    text = f"{PREFIX}[cuda.py:506] " + GPU_AUTO % ("FLASH_ATTN", "['FLASH_ATTN']") + "\n" + _lines(_worker(0))
    a = attest(text)
    assert a["mla"] is None and "vLLM printed the backend FLASH_ATTN" in a["unattested"]["mla"]
    agreeing = attest(f"{PREFIX}[cuda.py:506] " + GPU_AUTO % ("FLASHMLA", "['FLASHMLA']") + "\n" + _lines(_worker(0)))
    assert agreeing["mla"] is True

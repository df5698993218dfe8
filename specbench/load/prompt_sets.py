"""Prompt sets: the project's own (package data in ``specbench/prompts/<category>.jsonl``) or a user's JSONL.

Each line is ``{"id": ..., "category": ..., "messages": [{"role": "user", "content": ...}]}`` or the
short form ``{"prompt": "..."}`` (id and category then default to the file name and line number).
Acceptance depends strongly on the kind of text, so prompts carry a category and results can be
split by it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from specbench.errors import InputError
from specbench.io import read_text
from specbench.safe_yaml import loads_json

CATEGORIES = ("chat", "code", "math", "summarisation", "reasoning")
_ROLES = {"system", "user", "assistant"}


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    messages: list[dict[str, str]] = field(hash=False)
    # Set by a workload (specbench.load.workloads): its name, and the output length its sampler
    # gives the prompt (ShareGPT: the first reply's token count; MT-bench: 256), used when
    # load.output_len is "workload".
    workload: str = "builtin"
    output_len: int | None = None

    @property
    def text(self) -> str:
        """All message contents joined; used for linting and duplicate detection."""
        return "\n".join(m["content"] for m in self.messages)

    @property
    def sha256(self) -> str:
        """sha256 of the raw first user turn (UTF-8, before any chat template): the same text in two
        runs, whatever id or template each gave it."""
        first = next((m["content"] for m in self.messages if m["role"] == "user"), self.messages[0]["content"])
        return hashlib.sha256(first.encode("utf-8")).hexdigest()


def load_prompts(categories: list[str] | None = None, path: Path | None = None) -> list[Prompt]:
    """Prompts of the given categories (all if None), from ``path`` or the built-in sets.

    Raises InputError naming ``file:line`` for a bad line, and for a category with no prompts.
    """
    if path is not None:
        prompts = _read_file(Path(path))
    else:
        wanted = categories or list(CATEGORIES)
        unknown = [c for c in wanted if c not in CATEGORIES]
        if unknown:
            raise InputError(
                f"unknown prompt category {', '.join(unknown)}; built-in categories: {', '.join(CATEGORIES)}"
            )
        prompts = []
        for cat in wanted:
            ref = resources.files("specbench") / "prompts" / f"{cat}.jsonl"
            prompts.extend(_parse_lines(ref.read_text(encoding="utf-8"), f"specbench/prompts/{cat}.jsonl", cat))
        return prompts
    if categories:
        prompts = [p for p in prompts if p.category in categories]
        if not prompts:
            raise InputError(f"{path}: no prompts of category {', '.join(categories)}")
    return prompts


def _read_file(path: Path) -> list[Prompt]:

    text = read_text(path, "prompt file", fix="it must be UTF-8 JSONL")
    prompts = _parse_lines(text, str(path), path.stem)
    if not prompts:
        raise InputError(f"{path}: no prompts; expected one JSON object per line")
    return prompts


def _parse_lines(text: str, name: str, default_category: str) -> list[Prompt]:
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = loads_json(line, name, line=n, fix="fix that line of the prompt file")
        except ValueError as exc:  # JSONDecodeError, or a number over Python's 4300-digit int() limit
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(";")[0]
            raise InputError(f"{name}:{n}: not valid JSON ({why}); one JSON object per line") from None
        prompt = _prompt_from(obj, name, n, default_category)
        if prompt.id in seen:
            raise InputError(f"{name}:{n}: duplicate prompt id {prompt.id!r}; ids must be unique")
        seen.add(prompt.id)
        prompts.append(prompt)
    return prompts


def _prompt_from(obj: Any, name: str, n: int, default_category: str) -> Prompt:
    where = f"{name}:{n}"
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object with 'messages' or 'prompt'")
    unknown = set(obj) - {"id", "category", "messages", "prompt"}
    if unknown:
        raise InputError(
            f"{where}: unknown field(s) {', '.join(sorted(unknown))}; allowed: id, category, messages, prompt"
        )
    if ("messages" in obj) == ("prompt" in obj):
        raise InputError(f"{where}: give exactly one of 'messages' or 'prompt'")
    if "prompt" in obj:
        if not isinstance(obj["prompt"], str) or not obj["prompt"].strip():
            raise InputError(f"{where}: 'prompt' must be a non-empty string")
        messages = [{"role": "user", "content": obj["prompt"]}]
    else:
        messages = obj["messages"]
        if not isinstance(messages, list) or not messages:
            raise InputError(f"{where}: 'messages' must be a non-empty list")
        for i, m in enumerate(messages):
            if (
                not isinstance(m, dict)
                or m.get("role") not in _ROLES
                or not isinstance(m.get("content"), str)
                or set(m) - {"role", "content"}
            ):
                raise InputError(f'{where}: messages[{i}] must be {{"role": system|user|assistant, "content": string}}')
        messages = [dict(m) for m in messages]
    pid = obj.get("id", f"{default_category}-{n}")
    category = obj.get("category", default_category)
    if not isinstance(pid, (str, int)) or not isinstance(category, str):
        raise InputError(f"{where}: 'id' must be a string or integer and 'category' a string")
    return Prompt(id=str(pid), category=category, messages=messages)

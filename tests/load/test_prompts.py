"""Prompt sets (specbench/load/prompt_sets.py) and the built-in data files."""

from __future__ import annotations

import json

import pytest

from specbench.errors import InputError
from specbench.load.lint import lint
from specbench.load.prompt_sets import CATEGORIES, load_prompts


def test_builtin_sets_are_large_varied_and_clean():
    prompts = load_prompts()
    by_cat = {c: [p for p in prompts if p.category == c] for c in CATEGORIES}
    assert all(len(v) >= 20 for v in by_cat.values()), {c: len(v) for c, v in by_cat.items()}
    assert len({p.id for p in prompts}) == len(prompts)
    assert len({p.text for p in prompts}) == len(prompts)
    assert all(p.messages[-1]["role"] == "user" for p in prompts)
    assert all("Summarise the following" in p.text and len(p.text) > 150 for p in by_cat["summarisation"])
    assert lint(prompts) == []  # the shipped set must not trip our own lint


def test_category_selection():
    prompts = load_prompts(["math", "code"])
    assert {p.category for p in prompts} == {"math", "code"}
    with pytest.raises(InputError, match="unknown prompt category poetry"):
        load_prompts(["poetry"])


def test_user_file_both_forms(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text(
        json.dumps({"prompt": "hello there"})
        + "\n\n"
        + json.dumps(
            {
                "id": "x",
                "category": "chat",
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
            }
        )
        + "\n"
    )
    p1, p2 = load_prompts(path=f)
    assert (p1.id, p1.category, p1.messages) == ("mine-1", "mine", [{"role": "user", "content": "hello there"}])
    assert (p2.id, p2.category, len(p2.messages)) == ("x", "chat", 2)
    assert [p.id for p in load_prompts(["chat"], path=f)] == ["x"]


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", r"bad\.jsonl:2: not valid JSON"),
        ('["a"]', r"bad\.jsonl:2: expected a JSON object"),
        ('{"prompt": "a", "messages": []}', r"bad\.jsonl:2: give exactly one of"),
        ('{"messages": [{"role": "robot", "content": "x"}]}', r"bad\.jsonl:2: messages\[0\] must be"),
        ('{"prompt": "x", "temperature": 1}', r"bad\.jsonl:2: unknown field\(s\) temperature"),
        ('{"id": "a", "prompt": "again"}', r"bad\.jsonl:2: duplicate prompt id 'a'"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"id": "a", "prompt": "fine"}\n' + line + "\n")
    with pytest.raises(InputError, match=message):
        load_prompts(path=f)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="prompt file not found"):
        load_prompts(path=tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no prompts"):
        load_prompts(path=tmp_path / "empty.jsonl")

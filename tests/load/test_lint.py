"""Lint of prompt sets and load settings (specbench/load/lint.py)."""

from __future__ import annotations

from specbench.load.driver import LoadPlan
from specbench.load.lint import lint
from specbench.load.prompt_sets import Prompt


def P(pid: str, text: str) -> Prompt:
    return Prompt(pid, "chat", [{"role": "user", "content": text}])


def test_copy_tasks_and_duplicates_flagged():
    prompts = [
        P("a", "Repeat the following text exactly: hello"),
        P("b", "Copy this paragraph."),
        P("c", "What is a copy editor?"),
        P("d", "Tell me a joke"),
        P("e", "tell me  a JOKE"),
    ]
    warnings = lint(prompts)
    assert len(warnings) == 2
    assert "2 prompt(s) ask the model to copy text (a, b)" in warnings[0]
    assert "duplicate prompts (d, e)" in warnings[1]


def test_load_settings_flagged():
    spec = LoadPlan(
        num_requests=1,
        concurrency=1,
        max_tokens=8,
        temperature=0.7,
        top_p=0.9,
        ignore_eos=True,
        extra_body={"temperature": 0},
    )
    text = "\n".join(lint([P("a", "hi")], spec))
    for needle in ("ignore_eos is on", "temperature 0.7 > 0", "top_p 0.9 < 1", "extra_body sets 'temperature'"):
        assert needle in text


def test_clean_set_and_defaults_give_no_warning():
    assert lint([P("a", "hi"), P("b", "bye")], LoadPlan(num_requests=4, concurrency=2, max_tokens=8)) == []

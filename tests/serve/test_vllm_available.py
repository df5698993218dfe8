"""specbench/serve/server.vllm_available asked of another interpreter: the probe runs in that
interpreter and answers on its stdout (it ends no process with a code of its own choosing)."""

from __future__ import annotations

import os
import sys

import pytest

from specbench.serve.server import vllm_available


def _wrapper(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_an_interpreter_that_finds_vllm_says_so(tmp_path):
    if not vllm_available():
        pytest.skip("vLLM is not installed beside this interpreter")
    other = _wrapper(tmp_path, "python", f'exec {sys.executable} "$@"')  # another path, the same install
    assert os.path.realpath(other) != os.path.realpath(sys.executable)
    assert vllm_available(other) is True


@pytest.mark.parametrize(
    "body",
    ["echo True; exit 1", "echo False", "echo; exit 0", "echo 'True?'"],
    ids=["failed-run", "answers-no", "no-answer", "not-the-answer"],
)
def test_anything_but_a_clean_true_is_no_vllm(tmp_path, body):
    assert vllm_available(_wrapper(tmp_path, "python", body)) is False

"""Characters that reorder or hide text ("Trojan Source": bidirectional overrides and isolates,
zero-width characters) in a user-given string are shown, not obeyed, wherever specbench echoes it."""

from __future__ import annotations

import contextlib
import io

import pytest

from specbench.cli.main import run_cli
from specbench.render.format import shown_text, user_line

HIDDEN = ["\u202e", "\u202d", "\u2066", "\u2069", "\u200b", "\u200f", "\ufeff", "\u061c"]


@pytest.mark.parametrize("char", HIDDEN)
def test_a_reordering_or_invisible_character_is_shown_as_its_code(char):
    shown = shown_text(f"run{char}dir")
    assert char not in shown and f"\\u{ord(char):04x}" in shown
    assert char not in user_line(f"a{char}b")


def test_ordinary_text_is_left_as_written():
    text = "cpu-seed-questions ✅ α_1 MLA 日本語 — x/y"
    assert shown_text(text) == text


def test_a_path_with_a_right_to_left_override_is_echoed_in_the_order_it_was_given(tmp_path):
    """The error line of `specbench parse` names the path as given: the override visible, so the
    name cannot read as another file's (before: the raw U+202E reversed the rest of the line)."""
    path = tmp_path / "gol.\u202etxt"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run_cli(["parse", str(path)])
    line = err.getvalue()
    assert code == 2 and "\u202e" not in line and "gol.\\u202etxt" in line, line

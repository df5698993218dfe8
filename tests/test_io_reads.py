"""specbench/io.py's readers: JSON Lines split as JSON Lines, numbers JSON has not refused."""

from __future__ import annotations

import json
import re

import pytest

from specbench.errors import InputError
from specbench.io import read_jsonl_lines
from specbench.safe_yaml import loads_json


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085"])
def test_jsonl_lines_end_at_newline_only(sep, tmp_path):
    """Issue 43, item 6: JSON allows these raw inside a string; str.splitlines cut the line there
    and the row was refused as a corrupt JSON line."""
    f = tmp_path / "rows.jsonl"
    f.write_text('{"text": "a' + sep + 'b", "n": 1}\n{"n": 2}\n', encoding="utf-8", newline="")
    assert read_jsonl_lines(f) == [(1, {"text": "a" + sep + "b", "n": 1}), (2, {"n": 2})]


def test_crlf_jsonl_still_reads(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_bytes(b'{"n": 1}\r\n\r\n{"n": 2}\r\n')
    assert read_jsonl_lines(f) == [(1, {"n": 1}), (3, {"n": 2})]


@pytest.mark.parametrize(
    "row, field",
    [
        ('{"kind": "spec_decode", "accepted_tokens": NaN}', "accepted_tokens"),
        ('{"draft_tokens": Infinity}', "draft_tokens"),
        ('{"num_drafts": -Infinity}', "num_drafts"),
        ('{"accepted_tokens": 1e400}', "accepted_tokens"),
        ('{"per_position_acceptance": [0.5, NaN]}', r"per_position_acceptance\[1\]"),
        ('{"spec_decode": {"num_drafts": NaN}}', r"spec_decode\.num_drafts"),
    ],
)
def test_a_non_finite_number_is_refused_naming_file_line_and_field(row, field, tmp_path):
    """Issue 43, item 6: `accepted_tokens: NaN` blanked AL with no warning."""
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps({"n": 1}) + "\n" + row + "\n")
    with pytest.raises(InputError, match=rf"^{f}:2: {field} is (nan|inf|-inf), not a finite number; ") as exc:
        read_jsonl_lines(f)
    assert "\n" not in str(exc.value)


def test_deeply_nested_rows_are_walked_without_recursion(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text("[" * 900 + "]" * 900 + "\n")  # not an object: refused as one, not a RecursionError
    with pytest.raises(InputError, match="expected a JSON object"):
        read_jsonl_lines(f)
    f.write_text('{"a": ' + "[" * 900 + "NaN" + "]" * 900 + "}\n")
    with pytest.raises(InputError, match=r"a\[0\]\[0\]"):
        read_jsonl_lines(f)


@pytest.mark.parametrize(
    "token, shown",
    [
        ("99999e99", "99999e99, past any count, time or rate"),
        ("10e99", "10e99, past any count, time or rate"),
        ("-10e99", "-10e99, past any count, time or rate"),
        ("9" * 56 + "e99", "9" * 56 + "e99, past any count, time or rate"),  # ~1e155
        ("1" + "0" * 100 + ".5", "1" + "0" * 100 + ".5, past any count, time or rate"),
        ("1" + "0" * 400 + ".0", "inf, not a finite number"),
        ("-" + "9" * 101, "a 101-digit whole number, past any count, time or rate"),
    ],
    ids=["99999e99", "10e99", "-10e99", "56 digits e99", "101 digits .5", "401 digits .0", "-101 digits"],
)
def test_a_number_past_the_limit_is_refused_however_it_is_written(token, shown, tmp_path):
    """Review of loads_json: a text pre-check (an exponent of three digits, 100 digits in a row)
    chose when the number hooks ran, and 99999e99, 10e99 or a long mantissa with e99 (all 1e100
    or more) were returned as numbers. Every number now goes through the hooks."""
    f = tmp_path / "rows.jsonl"
    f.write_text('{"n": 1}\n\n{"a": 1, "b": [2, ' + token + "]}\n")
    with pytest.raises(InputError, match="^" + re.escape(f"{f}:3: b[1] is {shown}")):
        read_jsonl_lines(f)
    with pytest.raises(InputError, match="^" + re.escape(f"f.json:3: b is {shown}")):
        loads_json('{\n  "a": "1e999",\n  "b": ' + token + "\n}", "f.json")


def test_numbers_just_inside_the_limit_are_read():
    text = '{"a": 9.99e99, "b": -' + "9" * 100 + ', "c": ' + "9" * 100 + ', "d": 1e-400, "e": 0.5e1}'
    assert loads_json(text) == {"a": 9.99e99, "b": -int("9" * 100), "c": int("9" * 100), "d": 0.0, "e": 5.0}

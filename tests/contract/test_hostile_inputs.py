"""Issue 31's reproducers (hostile input, secrets and signals), one test each.

Each ran into a hang, a leaked secret, a wrong exit code or a changed input; now bad input exits 2
with one line, within a time bound, and nothing secret is printed or written. Run in-process
through ``run_cli`` like test_reproducers.py.
"""

from __future__ import annotations

import time

import pytest
from test_contract import BASELINE_RUN, _clean_env, check, invoke  # noqa: F401 - _clean_env: autouse
from test_reproducers import cfg

RECURSIVE = "a: &a [*a]\n"
# 51 KB of text that expands to 10 MB: one 50 KB string aliased 200 times.
AMPLIFIED = "s: &s '" + "y" * 50_000 + "'\nl: [" + ", ".join(["*s"] * 200) + "]\n"


def timed(argv: list, bound_s: float = 2.0) -> tuple[int, str, str]:
    start = time.monotonic()
    result = invoke(argv)
    assert time.monotonic() - start < bound_s, f"{argv[0]} took {time.monotonic() - start:.1f} s"
    return result


# -- recursive and amplifying aliases ------------------------------------------------------------
@pytest.mark.timeout(30)
@pytest.mark.parametrize("body, said", [(RECURSIVE, "recursive alias"), ("a: &a {b: *a}\n", "recursive alias"),
                                        (AMPLIFIED, "characters of text")], ids=["list", "mapping", "amplified"])
@pytest.mark.parametrize("command", ["validate", "dry-run"])
def test_recursive_or_amplifying_alias_in_a_config_is_refused_fast(tmp_path, body, said, command):
    p = cfg(tmp_path, body)
    code, out, err = timed(["validate", p] if command == "validate" else ["run", "--dry-run", p])
    check(command, code, out, err, allowed={2}, names=[p])
    assert said in err


@pytest.mark.timeout(30)
def test_recursive_alias_in_a_set_value_is_refused_fast(tmp_path):
    p = cfg(tmp_path, "")
    code, out, err = timed(["validate", p, "--set", "load.num_requests=&a [*a]"])
    check("--set", code, out, err, allowed={2}, names=["load.num_requests"])
    assert "recursive alias" in err


@pytest.mark.timeout(30)
def test_recursive_alias_in_a_gate_file_is_refused_fast(tmp_path):
    g = tmp_path / "gates.yaml"
    g.write_text(RECURSIVE + "gates: *a\n")
    code, out, err = timed(["compare", BASELINE_RUN, BASELINE_RUN, "--gate-file", g])
    check("gate file", code, out, err, allowed={2}, names=[g])


@pytest.mark.timeout(60)
def test_an_oversized_yaml_text_is_refused_before_parsing(tmp_path):
    p = cfg(tmp_path, "load: {num_requests: 4}\nx: [" + "1, " * 1_000_000 + "]\n")
    code, out, err = timed(["validate", p])
    check("validate", code, out, err, allowed={2}, names=[p])
    assert "more than" in err

"""``compare RUN --between AXIS=A,AXIS=B`` with list-valued axes: a ``speculative:`` axis's value is
compact JSON with commas in it (``[0.9,0.7,0.5]``), so the second value starts where the axis is
named again, not at the first comma."""

from __future__ import annotations

import pytest
import typer

from specbench.cli.compare_cmd import _split_between

AXIS = "speculative:synthetic_acceptance_rates"


def test_list_values_keep_their_commas():
    got = _split_between(f"{AXIS}=[0.9,0.7,0.5],{AXIS}=[0.85,0.7,0.5]")
    assert got == (AXIS, "[0.9,0.7,0.5]", "[0.85,0.7,0.5]")


@pytest.mark.parametrize(
    ("value", "want"),
    [("vllm=0.31.0,vllm=current", ("vllm", "0.31.0", "current")), ("mla=on, mla=off", ("mla", "on", "off"))],
)
def test_plain_values_split_as_before(value, want):
    assert _split_between(value) == want


@pytest.mark.parametrize(
    "value", [f"{AXIS}=[0.9,0.7,0.5]", f"{AXIS}=[0.9,0.7,0.5],{AXIS}=[0.9,0.7,0.5]", "mla=on,output_norm=off"]
)
def test_one_value_the_same_twice_or_two_axes_are_refused(value):
    with pytest.raises(typer.BadParameter):
        _split_between(value)

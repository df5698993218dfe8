"""A study's matrix axes, parsed once: ``env:NAME``, ``flag:--option``, ``load:setting``,
``speculative:FIELD`` (a field of vLLM's speculative config) or a built-in.

An axis is written as text in the config (``matrix: {"env:VLLM_FOO": [...]}``), and that same text
is what manifest.json, cell.json and ``baseline.draft_axes`` hold. :func:`parse_axis` reads it into an
:class:`Axis` (kind, name); :attr:`Axis.text` gives the text back unchanged and :attr:`Axis.label` the
short form of cell ids and table columns. Every module that needs to know what an axis sets asks
an :class:`Axis` instead of slicing its prefix.

It sits low in the layers (below :mod:`specbench.redact`, which hides secret axes' values) and
needs only :mod:`specbench.errors`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal, Optional, Union

from specbench.errors import ConfigError

AxisKind = Literal["env", "flag", "load", "speculative", "builtin"]
# The prefix of each prefixed kind, as written in configs and stored on disk.
_PREFIXES: dict[AxisKind, str] = {"env": "env:", "flag": "flag:", "load": "load:", "speculative": "speculative:"}

# Built-in axes: specbench knows what each sets (mla -> VLLM_MLA_DISABLE, k -> the speculative config).
# vllm -> the install that serves the cell (specbench/serve/installs.py).
BUILTIN_AXES = ("mla", "method", "output_norm", "pos0_mask", "num_speculative_tokens", "draft", "vllm")
# Axes that only make sense with speculation; the baseline cell reports them as "none".
SPEC_AXES = ("method", "output_norm", "pos0_mask", "num_speculative_tokens", "draft")
# Load settings as axes: cells that differ only in these share one server (run/groups.py).
# Load has no request rate (the built-in driver is closed-loop), so there is no load:request_rate.
LOAD_SETTINGS = ("concurrency", "max_tokens", "temperature", "category", "workload")
LOAD_AXES = tuple(f"load:{s}" for s in LOAD_SETTINGS)

# The built-in axes that switch one environment variable per cell: mla vLLM's, the others the
# plugin's head variant (specbench/serve/plugin). Each axis's value maps to that variable's value
# in one place, :meth:`Axis.env_value`, which run/cells.py uses for every one of them.
SWITCH_ENV = {"mla": "VLLM_MLA_DISABLE", "output_norm": "SPECBENCH_OUTPUT_NORM", "pos0_mask": "SPECBENCH_POS0_MASK"}
# Built-in axes whose values are on/off (YAML's bare on/off arrive as booleans and are stored as text).
ON_OFF_AXES = ("mla", "pos0_mask")

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FLAG_NAME = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
FIELD_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
# speculative: fields that specbench builds from serve.speculative: their own axes set them.
_BUILT_SPEC_FIELDS = {"method": "method", "model": "draft", "num_speculative_tokens": "num_speculative_tokens"}


class AxisError(ConfigError, ValueError):
    """A malformed axis. A ConfigError (one line, exit 2) where it reaches the CLI, and a ValueError
    so that inside a pydantic validator it becomes that field's error (``matrix.<axis>: ...``)."""


@dataclass(frozen=True)
class Axis:
    """One matrix axis. ``name``: the variable (``VLLM_FOO``), the option (``--max-num-seqs``), the
    load setting (``concurrency``) or the built-in axis (``mla``)."""

    kind: AxisKind
    name: str

    @property
    def text(self) -> str:
        """The axis as written in configs and stored on disk (``env:VLLM_FOO``, ``mla``)."""
        return _PREFIXES.get(self.kind, "") + self.name

    @property
    def label(self) -> str:
        """The short name of cell ids and table columns: ``VLLM_FOO``, ``max-num-seqs``, ``concurrency``."""
        return self.name.lstrip("-") if self.kind == "flag" else self.name

    @property
    def only_drafts(self) -> bool:
        """Whether the axis changes only the draft side (a baseline, which has no draft, does not vary
        on it): the speculative built-ins and every ``speculative:`` field."""
        return self.kind == "speculative" or (self.kind == "builtin" and self.name in SPEC_AXES)

    @property
    def env_var(self) -> str | None:
        """The environment variable a value of this axis sets in the cell's server: an ``env:``
        axis's own, a switch axis's (:data:`SWITCH_ENV`: ``mla`` -> ``VLLM_MLA_DISABLE``); None for
        the axes that set a flag, the speculative config, a load setting or the install."""
        if self.kind == "env":
            return self.name
        return SWITCH_ENV.get(self.name) if self.kind == "builtin" else None

    def env_value(self, value: object) -> str:
        """What :attr:`env_var` is set to for ``value``: ``mla`` on -> ``"0"``, off -> ``"1"``
        (vLLM reads ``VLLM_MLA_DISABLE``); any other axis's value as text."""
        if self == MLA:
            return "0" if self.is_on(value) else "1"
        return str(value)

    def is_on(self, value: object) -> bool | None:
        """An on/off axis's value (:data:`ON_OFF_AXES`, as stored or as YAML's boolean) as a bool;
        None for any other axis or value."""
        if self.kind != "builtin" or self.name not in ON_OFF_AXES:
            return None
        if value is True or value == "on":
            return True
        if value is False or value == "off":
            return False
        return None

    def __str__(self) -> str:
        return self.text


MLA = Axis("builtin", "mla")
OUTPUT_NORM = Axis("builtin", "output_norm")
POS0_MASK = Axis("builtin", "pos0_mask")


def on_off(flag: bool | None, unset: str = "default") -> str:
    """A switch as the text that axes, tables and keys show: ``on``, ``off``, or ``unset`` for None."""
    return unset if flag is None else ("on" if flag else "off")


def mla_disabled(env: dict[str, str]) -> bool | None:
    """Whether vLLM serves with MLA off in this environment: ``VLLM_MLA_DISABLE`` read as vLLM reads
    it, ``bool(int(value))`` (vllm/envs.py; so ``"01"`` is off too). None when it is not set, or
    set to what ``int`` refuses (vLLM fails at start: nothing is asked of MLA)."""
    raw = env.get(SWITCH_ENV["mla"])
    if raw is None:
        return None
    try:
        return bool(int(raw))  # exactly vLLM's reading: int() takes " 1 ", refuses "" and "true"
    except ValueError:
        return None


def parse_axis(text: str, *, strict: bool = True) -> Axis:
    """The :class:`Axis` written as ``text``.

    ``strict`` (the config's check): :class:`AxisError`, naming the axis and what to write instead,
    when ``text`` is no axis: an unknown built-in or load setting, a malformed variable or option.
    ``strict=False``: what ``text`` says by its prefix alone, for text that need not be a valid
    axis (a key read back from an older or hand-edited record, a table column's label, an override
    not yet validated, whose secret values must stay hidden all the same)."""
    if not isinstance(text, str):  # a YAML key may be a number or a boolean
        raise AxisError(f"{text!r}: an axis name is a string (mla, env:NAME, flag:--option, ...)")
    axis = next((Axis(k, text[len(p) :]) for k, p in _PREFIXES.items() if text.startswith(p)), None)
    axis = axis or Axis("builtin", text)
    problem = _problem(axis) if strict else None
    if problem:
        raise AxisError(f"{_shown(text)}: {problem}")
    return axis


def axis_label(text: str) -> str:
    """Short name of an axis in cell ids and table columns: env:FOO -> FOO, flag:--x-y -> x-y,
    load:concurrency -> concurrency (:attr:`Axis.label`; not strict: the keys of a record of any
    age, or a label already, come here too)."""
    return parse_axis(text, strict=False).label


UNSET = "unset"  # a speculative: axis's null (the field left unset) in cell ids, cell.json and tables

# A cell's axis values as its cell.json ``axes`` holds them (records.files.CellRecord.axes), and a
# cell's load settings: scalars (a list value is shown as compact JSON, a null one as UNSET; None
# only in a record of another age). Keyed by the axis as the config names it.
AxisScalar = Union[str, int, float, bool]
AxisValues = dict[str, Optional[AxisScalar]]


def list_value_text(value: list) -> str:
    """How a list-valued axis value (a ``speculative:`` axis's rates) stands in cell.json's axes and
    is read back: compact JSON, ``[0.9,0.7,0.5]``."""
    return json.dumps(value, separators=(",", ":"))


def value_slug(value: object) -> str:
    """An axis value as it reads in a cell id (a path component): a model path or hub id by its
    last component, anything but ``A-Za-z0-9._-`` as ``_``, at most 40 characters."""
    text = str(value)
    if "/" in text:  # a model path or hub id: its last component is the readable part
        text = text.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:40] or "_"


def _problem(axis: Axis) -> str | None:
    if axis.kind == "env" and not ENV_NAME.match(axis.name):
        return f"{axis.name!r} is not an environment variable name"
    if axis.kind == "flag" and not FLAG_NAME.match(axis.name):
        return f"{axis.name!r} is not a long option like '--max-num-batched-tokens'"
    if axis.kind == "speculative" and not FIELD_NAME.match(axis.name):
        return f"{axis.name!r} is not a speculative config field name like 'rejection_sample_method'"
    if axis.kind == "speculative" and axis.name in _BUILT_SPEC_FIELDS:
        return f"use the {_BUILT_SPEC_FIELDS[axis.name]!r} axis (specbench builds that field)"
    if axis.kind == "load" and axis.name not in LOAD_SETTINGS:
        return f"unknown load axis {axis.text!r}; use one of {', '.join(LOAD_AXES)}"
    if axis.kind == "builtin" and axis.name not in BUILTIN_AXES:
        return (
            f"unknown axis {axis.text!r}; use one of {', '.join(BUILTIN_AXES)}, 'env:NAME', 'flag:--option', "
            f"'speculative:FIELD' or {', '.join(LOAD_AXES)}"
        )
    return None


def _shown(text: str) -> str:
    # The message's first word is the axis, which the config's error turns into matrix.<axis>:
    # quoted when blank or spaced, so the field path stays one word.
    return text if re.fullmatch(r"\S+", text) else repr(text)

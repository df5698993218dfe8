"""The shapes of the run directory's JSON files, checked when a run is loaded.

A hand-edited or damaged file (``"cells": [1]``, ``"axes": 5``, ``"prometheus": [1, 2]``) must be
refused naming the file and field, not fail later inside an analysis with a TypeError. Only the
fields readers use are listed; unknown fields are allowed (newer writers may add some).

Spec language: a type or tuple of types (isinstance; bool is not a number here), ``[spec]`` (a list
of items of spec), ``{key: spec}`` (a mapping whose listed keys, where present, match; ``"*"``
applies to every value), ``Opt(spec)`` (spec or null).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Opt:
    spec: Any


NUM = (int, float)
SCALAR = Opt((str, int, float, bool))

MANIFEST = {"run_id": str, "cells": [str], "axes": Opt([str]), "status": Opt(str), "resolved_config": Opt(dict),
            "cell_hosts": Opt({"*": Opt(str)}), "config_path": Opt(str), "config_sha256": Opt(str),
            "machine": Opt(dict), "vllm_version": Opt(str)}
CELL = {"cell_id": str, "status": str, "axes": Opt({"*": SCALAR}), "repeat": Opt(int), "is_baseline": Opt(bool),
        "reason": Opt(str), "argv": Opt([str]), "env": Opt({"*": Opt(str)}), "timings": Opt({"*": Opt(NUM)}),
        "log_tail": Opt(str), "port": Opt(int), "host": Opt(str), "vllm_version": Opt(str),
        "exit_status": Opt(int)}
_COUNTS = Opt({"*": Opt((int, float, list))})
ACCEPTANCE = {
    "num_spec_tokens": Opt(int), "baseline": Opt(bool), "warnings": Opt([str]), "agreement": Opt(dict),
    "prometheus": Opt({"counts": _COUNTS}), "logs": Opt({"windows": Opt([_COUNTS])}),
    "per_request": Opt({"units": Opt([_COUNTS])}),
    "derived": Opt({"per_position": Opt([Opt(NUM)]), "conditional": Opt([Opt(NUM)]),
                    "mean_acceptance_length": Opt(NUM), "draft_acceptance_rate": Opt(NUM)}),
    "ci": Opt({"unit": Opt(str), "intervals": Opt({"*": Opt([Opt(NUM)])})}),
}


def shape_problem(value: Any, spec: Any, where: str = "") -> str | None:
    """A description of the first place ``value`` does not match ``spec``, or None."""
    if isinstance(spec, Opt):
        return None if value is None else shape_problem(value, spec.spec, where)
    if isinstance(spec, list):
        if not isinstance(value, list):
            return f"{where or 'top level'}: expected a list, got {_name(value)}"
        for i, item in enumerate(value):
            problem = shape_problem(item, spec[0], f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return f"{where or 'top level'}: expected an object, got {_name(value)}"
        for key, sub in value.items():
            inner = spec.get(key, spec.get("*"))
            if inner is not None:
                problem = shape_problem(sub, inner, f"{where}.{key}" if where else str(key))
                if problem:
                    return problem
        return None
    types = spec if isinstance(spec, tuple) else (spec,)
    if isinstance(value, bool) and bool not in types:
        return f"{where}: expected {_names(types)}, got a boolean"
    if not isinstance(value, types):
        return f"{where}: expected {_names(types)}, got {_name(value)}"
    return None


def _name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


def _names(types: tuple) -> str:
    words = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "a list",
             dict: "an object"}
    return " or ".join(words.get(t, t.__name__) for t in types)

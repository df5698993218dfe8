"""The head switches as data: which head, which values, what vLLM 0.32 ships (pure; no vLLM import).

specbench hands a cell's switches to the plugin inside vLLM through environment variables:

* ``SPECBENCH_OUTPUT_NORM``: ``on | off | logits-only`` (unset = ``on``, what both heads ship);
* ``SPECBENCH_POS0_MASK``: ``on | off`` (unset = the head's shipped value: EAGLE ``off``, MTP ``on``);
* ``SPECBENCH_HEAD_CONTROL``: ``1`` registers the plugin's re-implementation of the shipped forward
  even when the switches are at their shipped values (the control variant; ``0``/unset: not);
* ``SPECBENCH_HEAD_SWITCHABLE``: ``1`` registers the plugin's head class even at the shipped
  values, so that the running server's variant can be switched in place
  (:mod:`specbench.plugin.switch`; the server starts at the variant the other switches name);
* ``SPECBENCH_HEAD``: ``eagle | mtp``, which head the switches are for. specbench sets it in every
  cell that sets a switch, from the cell's method; it also marks the server as one specbench
  configured, where an unknown value stops the server instead of being ignored. Without it the
  switches apply to both DeepSeek heads (each compared with its own shipped values).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from specbench.errors import ConfigError

ENV_VAR = "SPECBENCH_OUTPUT_NORM"
POS0_MASK_VAR = "SPECBENCH_POS0_MASK"
CONTROL_VAR = "SPECBENCH_HEAD_CONTROL"
HEAD_VAR = "SPECBENCH_HEAD"
SWITCHABLE_VAR = "SPECBENCH_HEAD_SWITCHABLE"
SWITCH_VARS = (ENV_VAR, POS0_MASK_VAR, CONTROL_VAR, SWITCHABLE_VAR)
VARIANTS = ("on", "off", "logits-only")
POS0_MASK_VALUES = ("off", "on")
CONTROL_VALUES = ("0", "1")

# head -> (registry architecture the plugin re-registers, shipped (output_norm, pos0_mask)).
# vLLM 0.32: deepseek_eagle.py returns (norm, norm) and does not mask position 0; deepseek_mtp.py
# masks position 0 and carries the post-final-norm state (logits through shared_head's norm).
HEADS = {
    "eagle": ("EagleDeepSeekMTPModel", ("on", False)),
    "mtp": ("DeepSeekMTPModel", ("on", True)),
}
# The head files the variants re-implement, by sha256, and the vLLM releases that ship exactly that
# file (read in the released wheels). A head file with another hash is refused, naming the version:
# the variants would re-implement a forward this vLLM no longer has.
CHECKED_SOURCES = {
    "eagle": (
        "deepseek_eagle.py",
        {"203d8fedaec7e31f7d9ef959884214bef024ef0ad29924aec484c89398466a86": "0.29.0-0.34.0"},
    ),
    "mtp": ("deepseek_mtp.py", {"aae80e30b2dbfd1df41b83f51aaba4722e9f2dc3b4479d2a38ce1e32926fac11": "0.31.0-0.32.0"}),
}


def unchecked_source(head: str, path: str, vllm_version: str) -> str | None:
    """Why the installed head file at ``path`` is not one the plugin was checked against (None: it is)."""
    import hashlib

    name, known = CHECKED_SOURCES[head]
    try:
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
    except OSError as exc:
        return f"{name} unreadable ({exc})"
    if digest in known:
        return None
    return (
        f"vLLM {vllm_version}'s {name} (sha256 {digest[:12]}) is not the file of the releases the plugin was "
        f"checked against ({', '.join(known.values())})"
    )


# vLLM's speculative methods that build one of these heads (0.32 calls deepseek_mtp "mtp" too).
METHOD_HEADS = {"eagle": "eagle", "deepseek_mtp": "mtp", "mtp": "mtp"}
MTP_METHODS = tuple(m for m, h in METHOD_HEADS.items() if h == "mtp")


@dataclass(frozen=True)
class Switches:
    """One server's head switches. ``pos0_mask`` None = the head's shipped value."""

    output_norm: str = "on"
    pos0_mask: bool | None = None
    control: bool = False
    head: str | None = None  # None: not set by specbench (applies to both heads)
    switchable: bool = False  # the plugin's class even at the shipped values, to be switched in place

    def mask_for(self, head: str) -> bool:
        return HEADS[head][1][1] if self.pos0_mask is None else self.pos0_mask

    def is_shipped(self, head: str) -> bool:
        """Whether ``head`` would run exactly as vLLM ships it (nothing to register)."""
        return not (self.control or self.switchable) and (self.output_norm, self.mask_for(head)) == HEADS[head][1]

    def heads(self) -> tuple[str, ...]:
        return (self.head,) if self.head else tuple(HEADS)

    def to_register(self) -> dict[str, tuple[str, bool]]:
        """head -> (output_norm, pos0_mask) of every head whose variant must be registered."""
        return {h: (self.output_norm, self.mask_for(h)) for h in self.heads() if not self.is_shipped(h)}


def any_switch_set(env: Mapping[str, str]) -> bool:
    return any(env.get(v, "").strip() for v in (*SWITCH_VARS, HEAD_VAR))


def switches_from_env(env: Mapping[str, str]) -> Switches:
    """The switches ``env`` asks for; ConfigError naming the variable for an unknown value."""
    norm = _pick(env, ENV_VAR, VARIANTS, "on", "output-norm variant")
    mask = _pick(env, POS0_MASK_VAR, POS0_MASK_VALUES, None, "pos0-mask value")
    control = _pick(env, CONTROL_VAR, CONTROL_VALUES, "0", "control switch")
    head = _pick(env, HEAD_VAR, tuple(HEADS), None, "head")
    switchable = _pick(env, SWITCHABLE_VAR, CONTROL_VALUES, "0", "switchable flag")
    return Switches(norm, None if mask is None else mask == "on", control == "1", head, switchable == "1")


def _pick(env: Mapping[str, str], var: str, allowed: tuple[str, ...], default, what: str):
    value = env.get(var, "").strip()
    if value == "":
        return default
    if value not in allowed:
        raise ConfigError(f"{var}={value!r} is not a known {what}; use one of {', '.join(allowed)}")
    return value


def head_of_method(method: str) -> str | None:
    """The DeepSeek head a speculative ``method`` builds (None: a method the switches cannot act on)."""
    return METHOD_HEADS.get(method)


def mask_label(mask: bool) -> str:
    return "on" if mask else "off"


def variant_cache_key(env: Mapping[str, str]) -> str | None:
    """A sub-directory name for a compile cache that only this head variant may use (None: ``env``
    asks for no variant, so the server runs vLLM as shipped). vLLM's compile-cache key ignores the
    plugin's variant: servers sharing a VLLM_CACHE_ROOT could load another variant's compiled graph.

    A switchable server (``SPECBENCH_HEAD_SWITCHABLE=1``) gets a directory of its own per head and
    starting variant, apart from every server started at one fixed variant: its graph reads the
    variant from buffers (so switching never needs another), but a fixed-variant server never loads
    a graph it did not trace at its own variant, and a switchable server never loads one traced
    without the buffers (vLLM's own class at the shipped values), which a switch could not reach."""
    if not any(env.get(v, "").strip() for v in SWITCH_VARS):
        return None
    try:
        sw = switches_from_env(env)
    except ConfigError:
        return None  # refused before launch (plan.check_cells) or by the plugin at start-up
    parts = [
        sw.head or "any",
        sw.output_norm,
        "pos0-" + ("default" if sw.pos0_mask is None else mask_label(sw.pos0_mask)),
    ]
    return (
        "specbench-variant-"
        + "-".join(parts)
        + ("-control" if sw.control else "")
        + ("-switchable" if sw.switchable else "")
    )

"""The head switches as data: which head, which values, what vLLM 0.32 ships (pure; no vLLM import).

specbench hands a cell's switches to the plugin inside vLLM through environment variables:

* ``SPECBENCH_OUTPUT_NORM``: ``on | off | logits-only`` (unset = ``on``, what both heads ship);
* ``SPECBENCH_POS0_MASK``: ``on | off`` (unset = the head's shipped value: EAGLE ``off``, MTP ``on``);
* ``SPECBENCH_HEAD_CONTROL``: ``1`` registers the plugin's re-implementation of the shipped forward
  even when the switches are at their shipped values (the control variant; ``0``/unset: not);
* ``SPECBENCH_HEAD_SWITCHABLE``: ``1`` registers the plugin's head class even at the shipped
  values, so that the running server's variant can be switched in place
  (:mod:`specbench.serve.plugin.switch`; the server starts at the variant the other switches name);
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
# The functions of vLLM's head files that the variants re-implement (or call for the part they
# select), by a digest of their code (:func:`function_digest`), and the vLLM releases whose wheels
# hold exactly that code (read in the GPU wheels 0.29.0-0.34.0: benchmarks/head_support.py prints the
# table). Support is by function, not by file: 0.33 and 0.34 changed deepseek_mtp.py only in
# DeepSeekMTP.__init__ / load_weights, and are accepted; a release that changes one of these
# functions is refused, naming it and the version.
CHECKED_FUNCTIONS = {
    "eagle": (
        "deepseek_eagle.py",
        {
            "DeepseekV2Model.forward": {
                "6d303c5b1d0525a306b1c3e4dcfba607918db0216884352983c850b02a9b0000": "0.29.0-0.34.0"
            }
        },
    ),
    "mtp": (
        "deepseek_mtp.py",
        {
            "DeepSeekMultiTokenPredictorLayer.forward": {
                "5d511e977cd55d60a32b009b274331294c58782f235f3b754caf06f8ce66c118": "0.29.0-0.34.0"
            },
            "DeepSeekMultiTokenPredictor.compute_logits": {
                "bd6a980ff2422b1a3c201d3841b7300b33f59bee6e082fd3972a7f044ac8d451": "0.29.0-0.34.0"
            },
            "DeepSeekMTP.compute_logits": {
                "6d05704871775809d8a44e4b7d9c86f178970f0b3c0c59c1c100b6975deceeca": "0.29.0-0.34.0"
            },
            "SharedHead.forward": {"53298198a8ed6c29df82a5fec5ee68e6b23d25eb4569660e639d28facab454a5": "0.29.0-0.34.0"},
        },
    ),
}


def function_digest(source: str, qualname: str) -> str | None:
    """sha256 of the code of ``Class.method`` (or a module-level ``function``) in ``source``: its
    tokens without comments and blank or wrapped lines, so reformatting inside brackets and comments
    do not count, while any change to what runs does. None: no such function in ``source``."""
    import ast
    import hashlib
    import io
    import textwrap
    import tokenize

    tree = ast.parse(source)
    *owner, name = qualname.split(".")
    scope: list[ast.stmt] = tree.body
    for cls in owner:
        found = next((n for n in scope if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if found is None:
            return None
        scope = found.body
    node = next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None)
    if node is None:
        return None
    lines = source.splitlines(keepends=True)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    text = textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
    kept = [f"{t.type}:{t.string}" for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in skip]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()


def unchecked_source(head: str, path: str, vllm_version: str) -> str | None:
    """Why the installed head file at ``path`` is not one the plugin was checked against (None:
    every function the variants re-implement is as in a checked release)."""
    name, functions = CHECKED_FUNCTIONS[head]
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        return f"{name} unreadable ({exc})"
    for qualname, known in functions.items():
        try:
            digest = function_digest(source, qualname)
        except (SyntaxError, ValueError) as exc:
            return f"vLLM {vllm_version}'s {name} does not parse ({exc})"
        if digest is None:
            return f"vLLM {vllm_version}'s {name} has no {qualname}"
        if digest not in known:
            return (
                f"vLLM {vllm_version}'s {name} changed {qualname} (code sha256 {digest[:12]}), which the variants "
                f"re-implement as in the releases the plugin was checked against ({', '.join(sorted(set(known.values())))})"
            )
    return None


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

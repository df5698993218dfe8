"""``specbench run --set key.path=value``: command-line overrides of a study config.

Applied to the loaded YAML mapping before validation, so an override is checked exactly like the
same key written in the file (unknown key, wrong type, bounds); the value is read as YAML
(``--set load.num_requests=40``, ``--set serve.extra_args=[--seed,1]``,
``--set matrix.mla=[on]``). An override is shown and stored only through :func:`shown_override`
(secrets hidden). Pure functions.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Sequence

from specbench.errors import ConfigError
from specbench.redact import redact_value, scrub_words
from specbench.safe_yaml import load_yaml

_KEY = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_:][\w:-]*)*$")


def parse_override(text: str) -> tuple[list[str], Any]:
    """``key.path=value`` -> (["key", "path"], parsed value); ConfigError naming the flag otherwise."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key):
        raise ConfigError(f"--set {scrub_words(text)!r}: expected KEY.PATH=VALUE, e.g. --set load.num_requests=40")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except Exception as exc:  # noqa: BLE001 - any YAML problem is the user's value
        # The value is not echoed: it may be a token (--set serve.env.HF_TOKEN=...).
        raise ConfigError(
            f"--set {key}: the value is not valid YAML ({str(exc).splitlines()[0]}); quote a text value"
        ) from None
    return key.split("."), value


def shown_override(text: str) -> str:
    """``key.path=value`` as it may be printed or stored (manifest.json's ``overrides``): a secret
    in the value hidden as the manifest's ``resolved_config`` hides it (``serve.env.HF_TOKEN="***"``)."""
    try:
        path, value = parse_override(text)
    except ConfigError:  # shown in its own error, with what may be secret hidden
        return scrub_words(text)
    shown = redact_value(tuple(path), value)
    if shown == value:
        return text
    return f"{'.'.join(path)}={json.dumps(shown, default=str)}"


def apply_overrides(data: Any, overrides: Sequence[str]) -> Any:
    """A copy of ``data`` with every ``key.path=value`` set (intermediate mappings created)."""
    if not overrides:
        return data
    if not isinstance(data, dict):
        return data  # parse_study reports the top level
    out = copy.deepcopy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(
                    f"--set {'.'.join(path)}: {'.'.join(path[: i + 1])} is not a mapping in the config; set it whole"
                )
            node = child
        node[path[-1]] = value
    return out

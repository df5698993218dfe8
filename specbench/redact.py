"""Secrets: the one place that decides what is a secret and how it is hidden.

Every writer (cell.json, manifest.json, server.log, log tails, cells.csv/parquet, dry-run output)
goes through this module, so a secret never reaches a path, a file, a table or a log.

What counts as a secret
- **vLLM flags** (``vllm serve``, 0.32): ``--api-key`` takes one *or more* keys (argparse
  ``nargs='+'``: every value up to the next option is a key) and ``--hf-token`` takes an optional
  value (``nargs='?'``: a bare ``--hf-token`` followed by another option has no value, and that
  option must stay visible). vLLM's parser accepts unambiguous abbreviations (``allow_abbrev``):
  ``--api-k`` and ``--hf-t`` are the shortest ones (``--api-`` also matches
  ``--api-server-count``; ``--hf-`` matches ``--hf-overrides``), so every prefix from those up is
  a secret flag. Other tools' flags (llmperf extra args) are matched by name: ``*api-key*``,
  ``--token``, ``*-token``, ``*secret*``, ``*password*``, ``*credential*``.
- **Spellings**: vLLM's parser reads ``_`` as ``-`` in option names, so ``--api_key`` and ``--hf_t``
  are the same flags. A JSON-valued flag (``--kv-transfer-config '{...}'``) has the values of its
  secret-named keys (``*key*``, ``*token*``, ``*secret*``, ``*password*``, ``*auth*``) hidden.
- **Values shaped like credentials**, whatever the variable or flag is called: ``sk-...``,
  ``hf_...``, ``ghp_...``/``github_pat_...``, ``AKIA...``, ``xox?-...``, ``Bearer ...``/``Basic ...``,
  and credential query parameters in URLs (``?api_key=``, ``&token=``, ``&sig=``).
- **Environment names** containing (case-insensitive) ``KEY``, ``TOKEN`` (not ``TOKENS`` /
  ``TOKENIZER``: ``TOKENIZERS_PARALLELISM`` is not a secret), ``SECRET``, ``PASSWORD``,
  ``PASSWD``, ``PASSPHRASE``, ``CREDENTIAL(S)``, ``AUTH``, ``COOKIE``, ``SESSION``, ``PRIVATE``,
  ``DSN``, ``DATABASE_URL``, ``PAT`` as a word (``GH_PAT``), or ending in ``HEADERS``
  (``OTEL_EXPORTER_OTLP_HEADERS``: the OTLP exporter's auth headers), unless the name ends in a setting word (``_MODE``, ``_TYPE``,
  ``_ENABLED``, ...: ``RAY_AUTH_MODE=token`` is a mode); and any variable whose *value* is a URL
  with user info (``postgres://user:pw@host``), whatever its name (``*_URL``, ``*_URI``).

How it is hidden
- In argv and env: the value becomes ``***``.
- As a matrix axis value (``env:OPENAI_API_KEY: [sk-a, sk-b]``, ``flag:--api-key: [...]``): a
  stable short hash, ``sha256:<8 hex>``, in ``axes``; the cell id carries ``OPENAI_API_KEY-<8 hex>``.
  The cells stay distinguishable and two runs with the same keys still pair up in ``compare``.
- In free text (server.log, log tails): every secret value of length >= 4 is replaced by ``***``,
  except a secret-named variable's value that is a plain word (``SOME_AUTH=kerberos``): the word
  stays, so the logs stay readable and parseable.
- A URL with user info anywhere (an ``extra_args`` endpoint, a ``flag:`` axis value, ``serve.model``,
  an error message): ``http://user:***@host`` (``https://***@host`` for a bare token); as an axis
  value, the short hash.
- A ``--set`` override is shown and stored (manifest ``overrides``) with the same rules applied to
  the value at its path (``serve.env.HF_TOKEN="***"``); ``--resume`` takes it from the environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

from specbench.axis import parse_axis
from specbench.io import atomic_write_text

REDACTED = "***"

# Full vLLM flag name -> (shortest unambiguous abbreviation vLLM accepts, nargs).
VLLM_SECRET_FLAGS = {"--api-key": ("--api-k", "+"), "--hf-token": ("--hf-t", "?")}
_OTHER_SECRET_FLAG = re.compile(
    r"^--(.*api[-_]?key.*|(.*[-_])?token|.*secret.*|.*password.*|.*passwd.*|.*credentials?)$", re.IGNORECASE
)
_SECRET_ENV = re.compile(
    r"KEY|TOKEN(?!S|IZER)|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|DSN"
    r"|DATABASE_URL|(^|_)PAT($|_)|HEADERS$",  # GH_PAT; OTEL_EXPORTER_OTLP_(TRACES_)HEADERS carry auth headers
    re.IGNORECASE,
)
# Values that are credentials whatever the variable or flag is called: OpenAI/Anthropic-style keys,
# Hugging Face and GitHub tokens, AWS access key ids, bearer/basic authorization values.
_CREDENTIAL_VALUE = re.compile(
    r"(^|[\s=,:\"'/])("
    r"sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|A[KS]IA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}|(?i:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"
    r")"
)
# Query parameters that carry a credential in a URL (?api_key=..., &token=..., &sig=...).
_SECRET_QUERY = re.compile(
    # the value ends before a ':' or ';' that ends the text or a word (``?token=abc: no such run``)
    r"([?&](?:[A-Za-z0-9_.-]*(?:key|token|secret|password|passwd|sig|signature|auth|credential)s?)=)"
    r"([^&#\s]+?)(?=[:;]?(?:[&#\s]|$))",
    re.IGNORECASE,
)
# JSON keys whose values are secrets inside a JSON-valued flag (--kv-transfer-config {...}).
_SECRET_JSON_KEY = re.compile(r"key|token|secret|password|passwd|credential|auth", re.IGNORECASE)
# A name ending in one of these names a setting about a secret, not the secret (RAY_AUTH_MODE=token,
# XDG_SESSION_TYPE=tty, API_KEY_ENABLED=1).
_SETTING_ENV = re.compile(r"_(MODE|TYPE|KIND|CLASS|METHOD|ENABLED?|DISABLED?|LEVEL|PROVIDER|BACKEND)$", re.IGNORECASE)
# A value of letters only and this short is a word (a mode, a boolean, "token", "user"), not a
# credential: hidden in env and argv, but not replaced in free text, where it would hit the same
# word everywhere in a log ("Accepted: 28 ***s", "num_speculative_***").
_WORD = re.compile(r"^[A-Za-z]{1,11}$")
_URL_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]*@")
_URL_USERINFO_ANY = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/@\s]+)@")


def secret_flag(arg: str) -> str | None:
    """The nargs ('+', '?' or '1') of ``arg``'s option when it carries a secret, else None.

    ``arg`` may be ``--flag`` or ``--flag=value``; ``-api-key`` (one dash, as Go-style tools spell
    long options) counts as ``--api-key`` with one value."""
    flag = arg.split("=", 1)[0]
    if re.match(r"^-[^-].", flag):
        return "1" if _OTHER_SECRET_FLAG.match("-" + flag) else None
    if not flag.startswith("--"):
        return None
    flag = "--" + flag[2:].replace("_", "-")  # vLLM's parser reads --api_key as --api-key
    for full, (shortest, nargs) in VLLM_SECRET_FLAGS.items():
        if len(flag) >= len(shortest) and full.startswith(flag):
            return nargs
    return "1" if _OTHER_SECRET_FLAG.match(flag) else None


def secret_env_name(name: str) -> bool:
    return bool(_SECRET_ENV.search(name)) and not _SETTING_ENV.search(name)


def secret_env(name: str, value: Any) -> bool:
    """Whether the variable ``name=value`` is a secret: by its name, a URL with user info, or a
    value shaped like a credential (``sk-...``, ``hf_...``, ``ghp_...``, ``AKIA...``, ``Bearer ...``)."""
    return secret_env_name(name) or bool(_URL_USERINFO.match(str(value))) or credential_value(str(value))


def credential_value(text: str) -> bool:
    """Whether ``text`` holds something shaped like a credential, whatever it is called."""
    return bool(_CREDENTIAL_VALUE.search(text))


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Copy of ``env`` with secret values replaced by ``***`` (and passwords in URLs inside others)."""
    return {k: (REDACTED if secret_env(k, v) else redact_urls(v)) for k, v in env.items()}


def redact_urls(text: str) -> str:
    """``text`` with the user info of every URL in it hidden: ``http://u:pw@h`` becomes
    ``http://u:***@h``, ``https://TOKEN@h`` becomes ``https://***@h``."""

    text = _URL_USERINFO_ANY.sub(_hide_userinfo, text) if "@" in text else text
    if "=" in text and ("?" in text or "&" in text):
        text = _SECRET_QUERY.sub(lambda m: m.group(1) + REDACTED, text)
    return text


# A URL given where a path is expected comes back from pathlib with one slash: https:/u:pw@h/r.
_PATH_MANGLED_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*:/)(?!/)([^/@\s]+)@")


def redact_message(text: str) -> str:
    """An error message, a warning, a traceback or any string a user gave as it is shown
    (render.format.shown_text): :func:`redact_text` (URL passwords, secret query parameters,
    credential-shaped words: an ``hf_...`` token given where a path goes), and the user info of a
    URL that pathlib folded to one slash (a URL passed as a run directory), which no longer reads
    as a URL."""
    text = redact_text(text)
    return _PATH_MANGLED_USERINFO.sub(_hide_userinfo, text) if "@" in text else text


def _hide_userinfo(m: re.Match) -> str:
    """A URL's ``scheme://user:pw@`` (group 1 the scheme, group 2 the user info) with the secret hidden."""
    user, colon, _ = m.group(2).partition(":")
    return m.group(1) + (f"{user}:{REDACTED}" if colon else REDACTED) + "@"


def redact_text(text: str) -> str:
    """Free text read from an input (a failed cell's reason, a model URL in a manifest) as it may be
    shown: URL passwords and secret query parameters hidden, credential-shaped words too."""
    text = redact_urls(text)
    if _CREDENTIAL_VALUE.search(text):
        text = _CREDENTIAL_VALUE.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def redact_strings(value: Any) -> Any:
    """``value`` (parsed JSON) with :func:`redact_text` applied to every string in it."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_strings(v) for v in value]
    return value


def url_secrets(text: str) -> list[str]:
    """The passwords (or bare tokens) in the user info of the URLs in ``text``, the values of
    credential query parameters, and anything shaped like a credential."""
    out = []
    for m in _URL_USERINFO_ANY.finditer(text):
        user, colon, password = m.group(2).partition(":")
        secret = password if colon else user
        if secret and secret != REDACTED:
            out.append(secret)
    out += [m.group(2) for m in _SECRET_QUERY.finditer(text) if m.group(2) != REDACTED]
    out += [m.group(2).split()[-1] for m in _CREDENTIAL_VALUE.finditer(text)]
    return out


def _json_secrets(value: Any) -> list[str]:
    """Values of secret-named keys anywhere in a JSON value."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, (dict, list)):
                    stack.append(x)
                elif _SECRET_JSON_KEY.search(str(k)) and x not in (None, "", True, False):
                    out.append(str(x))
        elif isinstance(v, list):
            stack.extend(v)
    return out


def _redact_json_arg(arg: str) -> str:
    """A JSON-object argument (``--kv-transfer-config '{...}'``) with secret-named keys' values hidden."""
    body = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
    if not body.lstrip().startswith("{"):
        return arg
    try:
        secrets = _json_secrets(json.loads(body))
    except ValueError:
        return arg
    return scrub_text(arg, secrets) if secrets else arg


def _is_option(arg: str) -> bool:
    # argparse treats "-x..." as an option, except negative numbers.
    return arg.startswith("-") and len(arg) > 1 and not re.match(r"^-\d", arg)


def secret_spans(argv: list[str]) -> list[tuple[int, int]]:
    """(flag index, end index exclusive) of every secret option and the values it takes.

    A secret option that must take a value (``--api-key``: one or more; other tools' ``--token``:
    one) takes the next argument even when it looks like an option (``--api-key -X``): the tool
    would read it so or fail, and a key must never show because it starts with a dash."""
    spans = []
    i = 0
    while i < len(argv):
        nargs = secret_flag(argv[i])
        if nargs is None or "=" in argv[i]:
            i += 1
            if nargs is not None:
                spans.append((i - 1, i))
            continue
        j = i + 1
        if nargs in ("+", "1") and j < len(argv):
            j += 1
        if nargs == "+":
            while j < len(argv) and not _is_option(argv[j]):
                j += 1
        elif nargs == "?" and j < len(argv) and not _is_option(argv[j]):
            j += 1
        spans.append((i, j))
        i = j
    return spans


def redact_argv(argv: list[str]) -> list[str]:
    """Copy of ``argv`` with every value of a secret option replaced (all values of ``--api-key``)
    and the user info of every URL hidden."""
    out = [redact_urls(_redact_json_arg(a)) for a in argv]
    for start, end in secret_spans(argv):
        if "=" in argv[start]:
            out[start] = argv[start].split("=", 1)[0] + "=" + REDACTED
        for j in range(start + 1, end):
            out[j] = REDACTED
    return out


def argv_secret_values(argv: list[str]) -> list[str]:
    out = [u for a in argv for u in url_secrets(a)]
    for a in argv:
        body = a.split("=", 1)[1] if a.startswith("--") and "=" in a else a
        if body.lstrip().startswith("{"):
            try:
                out += _json_secrets(json.loads(body))
            except ValueError:
                pass
    for start, end in secret_spans(argv):
        if "=" in argv[start]:
            out.append(argv[start].split("=", 1)[1])
        out.extend(argv[start + 1 : end])
    return out


def server_api_key(argv: list[str], env: dict[str, str]) -> str | None:
    """The API key a vLLM server started with ``argv``/``env`` demands on /v1: the first value of
    ``--api-key`` (or an abbreviation), else ``VLLM_API_KEY``; None when it demands none."""
    for start, end in secret_spans(argv):
        if VLLM_SECRET_FLAGS["--api-key"][1] != secret_flag(argv[start]):
            continue
        if "=" in argv[start]:
            return argv[start].split("=", 1)[1]
        if end > start + 1:
            return argv[start + 1]
    return env.get("VLLM_API_KEY") or None


def secret_values(env: dict[str, str], argv: list[str], *, include_process_env: bool = False) -> list[str]:
    """Every secret value in ``env``/``argv`` (and specbench's own environment, which the servers
    inherit): what must not appear in any file. A secret-named variable whose value is a plain word
    (letters only, under 12) is left out: replacing that word everywhere would destroy the logs."""
    envs: list[dict[str, str]] = [env]
    if include_process_env:
        envs.append(dict(os.environ))
    out = [v for e in envs for k, v in e.items() if v and secret_env_name(k) and not _WORD.match(v)]
    out += [v for e in envs for k, v in e.items() if v and not secret_env_name(k) and credential_value(v)]
    out += [u for e in envs for v in e.values() for u in url_secrets(v)]
    return out + [v for v in argv_secret_values(argv) if v]


def scrub_words(text: str) -> str:
    """``text`` (a malformed ``--set`` echoed in its own error) with every word after a secret-named
    one, and every credential-shaped or URL-password word, hidden."""
    out, hide = [], False
    for word in re.split(r"(\s+|[:=])", text):
        bare = word.strip()
        if hide and bare and bare not in ":=":
            out.append(REDACTED)
            continue
        out.append(REDACTED if bare and credential_value(bare) else redact_urls(word))
        if bare and secret_env_name(bare.split(".")[-1]):
            hide = True
    return "".join(out)


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of a secret value (len >= 4; shorter ones would hit ordinary text)."""
    for s in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    return text


# -- matrix axes -------------------------------------------------------------------------------
def secret_axis(axis: str) -> bool:
    """Whether the values of matrix axis ``axis`` are secrets (``env:*KEY*``, ``flag:--api-key``).

    Read by its prefix alone (not strict): a malformed axis is refused by the config's validation,
    but an override (``--set matrix.env:1_TOKEN=[...]``) is shown in that very refusal first."""
    parsed = parse_axis(axis, strict=False)
    if parsed.kind == "env":
        return secret_env_name(parsed.name)
    if parsed.kind == "flag":
        return secret_flag(parsed.name) is not None
    return False


def short_hash(value: Any) -> str:
    return hashlib.sha256(str(value).encode("utf-8")).hexdigest()[:8]


def shown_axis_value(axis: str, value: Any) -> Any:
    """What an axis value looks like on disk and on screen: secrets as ``sha256:<8 hex>``."""
    if (
        isinstance(value, bool)
        or is_hidden_axis_value(value)
        or (not secret_axis(axis) and not _URL_USERINFO_ANY.search(str(value)))
    ):
        return value
    return f"sha256:{short_hash(value)}"


def is_hidden_axis_value(value: Any) -> bool:
    return isinstance(value, str) and bool(re.match(r"^sha256:[0-9a-f]{8}$", value))


def redact_config(data: dict) -> dict:
    """A study's resolved config (``Study.model_dump(mode="json")``) with secret env values and
    credential flags replaced, secret axis values hashed and passwords in URLs hidden (it goes to
    disk as the manifest's ``resolved_config``)."""
    return redact_value((), data)


def redact_value(path: tuple[str, ...], value: Any) -> Any:
    """``value``, found at ``path`` in a study config (``("serve", "env")``, ``()`` for the whole
    config), with what is secret there hidden: ``serve.env`` entries by name or URL, every
    ``extra_args`` as argv, ``matrix`` axis values as their short hashes, any other text's URL
    passwords. Any shape is taken (an unvalidated ``--set`` value, too)."""
    if path[-1:] == ("extra_args",) and isinstance(value, list) and not any(isinstance(a, (dict, list)) for a in value):
        shown = redact_argv([str(a) for a in value])
        return [a if s == str(a) else s for a, s in zip(value, shown)]
    if path[-1:] == ("extra_args",) and isinstance(value, str):  # a mistyped --set: argv as one string
        return " ".join(redact_argv(value.split()))
    scalar = not isinstance(value, (dict, list))
    if scalar and len(path) >= 3 and path[:2] == ("serve", "env") and secret_env(path[2], value):
        return REDACTED
    # anywhere else (a misspelt section, ``serve.envs.HF_TOKEN``): a secret-named key or a value
    # shaped like a credential is hidden too
    if scalar and path and path[0] != "matrix" and (secret_env_name(path[-1]) or credential_value(str(value))):
        return REDACTED
    if scalar and len(path) >= 2 and path[0] == "matrix":
        return shown_axis_value(path[1], value)
    if isinstance(value, dict):
        return {k: redact_value((*path, str(k)), v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(path, v) for v in value]
    return redact_urls(value) if isinstance(value, str) else value


def scrub_file(path, secrets: list[str]) -> None:
    """Replace every secret in a text file (a server log) in place, atomically; a no-op when there
    is nothing to hide."""
    path = Path(path)
    if not path.is_file() or not [s for s in secrets if s and len(s) >= 4]:
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    scrubbed = scrub_text(text, secrets)
    if scrubbed != text:
        atomic_write_text(path, scrubbed)

"""Which flags the installed ``vllm serve`` accepts, asked of vLLM's own parser (not a version table).

Read once per installed vLLM in a subprocess (importing vLLM costs ~15 s and much memory, which the
specbench process itself never pays), cached on disk keyed by the vLLM version and the location and
modification time of its argument-parsing module, so an upgrade asks again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from specbench.io import atomic_write_text, cache_root
from specbench.serve.vllm_main import installed_vllm_version

# Prints every option string of `vllm serve`, from the parser vLLM's CLI builds (ServeSubcommand).
_PROBE = (
    "import json\n"
    "from vllm.entrypoints.cli.serve import ServeSubcommand\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser(prog='vllm')\n"
    "sub = ServeSubcommand().subparser_init(p.add_subparsers(dest='subparser'))\n"
    "print('SPECBENCH-FLAGS ' + json.dumps(sorted({s for a in sub._actions for s in a.option_strings})))\n"
)


def _cache_file() -> Path:
    return cache_root() / "vllm-serve-flags.json"


def _install_key(python: str) -> str | None:
    """Version, place and mtime of the vLLM ``python`` imports, without importing it."""
    import importlib.util

    if python != sys.executable:
        return None  # another environment: not cached (its vLLM may change under us)
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])

    stamp = [str(root), str(installed_vllm_version())]
    for rel in ("engine/arg_utils.py", "entrypoints/cli/serve.py"):
        try:
            stamp.append(str((root / rel).stat().st_mtime_ns))
        except OSError:
            stamp.append("-")
    return hashlib.sha256("|".join(stamp).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def serve_flags(python: str = sys.executable) -> frozenset[str] | None:
    """Every option string ``vllm serve`` accepts (None: vLLM not importable there, or its parser
    could not be built: the caller falls back to what it knows)."""
    key = _install_key(python)
    cache = _cache_file()
    if key is not None:
        try:
            cached = json.loads(cache.read_text(encoding="utf-8"))
            if key in cached:
                return frozenset(cached[key])
        except (OSError, ValueError, TypeError):
            pass
    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("SPECBENCH-FLAGS ")), None)
    if out.returncode != 0 or line is None:
        return None
    flags = frozenset(json.loads(line.split(" ", 1)[1]))
    if key is not None:
        try:
            try:
                data = json.loads(cache.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            data = {**(data if isinstance(data, dict) else {}), key: sorted(flags)}
            cache.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(cache, json.dumps(data))
        except OSError:
            pass  # a read-only home: asked again next time
    return flags


def flag_value(args: list[str], flag: str) -> str | None:
    """The value ``args`` (a ``vllm serve`` argv) gives ``flag``, as ``--flag V`` or ``--flag=V``; the
    last one wins, as argparse reads it; None when absent."""
    found = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith(flag + "="):
            found = a.split("=", 1)[1]
    return found

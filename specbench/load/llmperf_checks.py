"""Checks and defaults for the llmperf adapter that need no server: the checkout, its python, its
tokenizer (the offline trap), input lengths that fit the model, and killing llmperf's process group."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from specbench.errors import DependencyError
from specbench.serve.flags import flag_value
from specbench.serve.procs import kill_tree

# SIGTERM to llmperf's process group (Ray's workers included), SIGKILL after this long.
KILL_GRACE_S = 10.0

SCRIPT = "token_benchmark_ray.py"
# sitecustomize that prints the server's message of an HTTP error llmperf drops (observation only);
# it runs the user's own sitecustomize first, so putting it on the path shadows nothing.
OBSERVER = Path(__file__).resolve().parent / "llmperf_observe"


def llmperf_env(spec: Any, base_url: str, tmp_dir: str) -> dict[str, str]:
    """The environment llmperf runs in, and its tokenizer pre-check in exactly the same one (a
    pre-check without the observer, or with another path, passed where the load then hung): the
    user's environment plus the server's URL and key, the observer and the checkout's ``src`` first
    on PYTHONPATH, and ``tmp_dir`` as TMPDIR and Ray's session folder."""
    env = dict(os.environ)
    env["OPENAI_API_BASE"] = base_url.rstrip("/") + "/v1"
    if spec.api_key:
        env["OPENAI_API_KEY"] = spec.api_key
    env.setdefault("OPENAI_API_KEY", "specbench-dummy-key")  # llmperf refuses to start without one
    env["PYTHONPATH"] = os.pathsep.join(
        [str(OBSERVER), str(Path(spec.path) / "src"), *filter(None, [env.get("PYTHONPATH")])]
    )
    # Ray's session (AF_UNIX sockets, at most 107 bytes of path) goes under TMPDIR: a short private
    # one keeps it valid under a long TMPDIR and apart from any other Ray (the Ray executor's).
    env["TMPDIR"] = env["RAY_TMPDIR"] = tmp_dir
    return env


def default_input_tokens(server_args: list[str], max_tokens: int) -> int:
    """llmperf's 550 unless the server's --max-model-len is smaller: then half of what max_tokens
    leaves (llmperf counts with its own Llama tokenizer, the server with the model's; the chat
    template adds more), but at least llmperf's floor of 41."""
    mml = flag_value(server_args, "--max-model-len")
    try:
        left = int(mml) - max_tokens if mml is not None else None
    except ValueError:
        left = None
    return 550 if left is None else max(41, min(550, left // 2))


def check_llmperf(path: str | Path, python: str) -> None:
    """DependencyError unless ``path`` holds llmperf's script and ``python`` is an interpreter."""
    script = Path(os.path.expanduser(str(path))) / SCRIPT
    if not script.is_file():
        raise DependencyError(
            f"{script} not found; git clone https://github.com/ray-project/llmperf and pass its path "
            "(with the python of a venv where it is installed)"
        )
    exe = os.path.expanduser(python)
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)) and shutil.which(exe) is None:
        raise DependencyError(
            f"llmperf python {python!r} not found or not executable; give the python of the "
            "venv where llmperf is installed (load.llmperf.python)"
        )


def start_in_checkout(argv: list[str], checkout: Any, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` as llmperf runs (the load and its tokenizer pre-check alike): in the
    ``checkout``, in ``env``, no stdin, stdout and stderr one pipe, and in its own session, so that
    :func:`kill_tree` stops it with everything it started (Ray's workers)."""
    return subprocess.Popen(
        argv,
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


_TOKENIZER_CHECK = """
import inspect, llmperf.utils as u
tok = inspect.signature(u.randomly_sample_sonnet_lines_prompt).parameters["tokenizer"].default
n = len(tok.encode("Shall I compare thee to a summer's day?"))
assert n > 1, "llmperf's tokenizer is empty (%d tokens for a sentence)" % n
"""
_tokenizer_ok: set[tuple[str, str, str | None]] = set()


def check_tokenizer(spec: Any, env: dict[str, str], timeout_s: float = 120.0) -> None:
    """DependencyError unless llmperf's own tokenizer loads (importing llmperf.utils loads it)
    within ``timeout_s``, in ``env`` (the load's, from :func:`llmperf_env`). Offline, transformers
    retries the hub for minutes and then hands llmperf an empty tokenizer, on which its prompt
    builder loops forever: a hang with no message."""
    key = (str(spec.path), spec.python, env.get("PYTHONPATH"))
    if key in _tokenizer_ok:
        return
    proc = start_in_checkout([spec.python, "-c", _TOKENIZER_CHECK], spec.path, env)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        why = None if proc.returncode == 0 else (out.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
    except subprocess.TimeoutExpired:
        kill_tree(proc, grace_s=KILL_GRACE_S)
        why = f"it did not load within {timeout_s:.0f} s"
    if why:
        raise DependencyError(
            f"llmperf's tokenizer (hf-internal-testing/llama-tokenizer, loaded when llmperf starts) failed in "
            f"{spec.python}: {why[:200]}; without the Hugging Face hub, download it once where the hub is "
            "reachable into the HF cache and set HF_HUB_OFFLINE=1, or point llmperf's checkout at a local "
            "tokenizer folder"
        )
    _tokenizer_ok.add(key)

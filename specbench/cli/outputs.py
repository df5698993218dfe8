"""Output paths checked before any work: a bad one is a usage error (exit 2) naming the flag, and
nothing is written when one of several outputs cannot be (``--plot x.exe`` used to fail after the
Markdown and JSON were already written)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from specbench.errors import ConfigError, InputError
from specbench.io import STREAM_OUTPUTS, protect_inputs, special_kind, written_input

PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def guard_outputs(
    inputs: Iterable[Path | None],
    files: dict[str, Path | None] | None = None,
    dirs: dict[str, Path | None] | None = None,
    env_files: Iterable[str] = (),
) -> None:
    """Protect ``inputs`` from every later write, then check output ``files`` (flag -> path) and
    output ``dirs`` (flag -> directory) can be written; ConfigError naming the flag otherwise.
    ``env_files``: environment variables naming output files (``GITHUB_STEP_SUMMARY``), refused
    when they point at or into an input (other problems with them are the writer's warning)."""
    given = [p for p in inputs if p is not None]
    for p in given:
        # Every path a command reads is a regular file or a directory: a FIFO would block the
        # read for ever, a device never end (judged from os.stat, nothing opened).
        kind = special_kind(p) if str(p) != "-" else None
        if kind is not None:
            raise InputError(f"{p}: is {kind}, not a regular file or directory; give a file or a run directory")
    protect_inputs(given)
    for name in env_files:
        env_path = os.environ.get(name)
        owner = written_input(Path(env_path)) if env_path else None
        if owner is not None:
            raise ConfigError(
                f"{name}={env_path}: is (inside) an input of this command ({owner}); point {name} elsewhere or unset it"
            )
        kind = _output_kind(Path(env_path)) if env_path else None
        if kind is not None:
            raise ConfigError(f"{name}={env_path}: is {kind}; point {name} at a regular file or unset it")
    seen: dict[str, str] = {}  # resolved output path -> the flag that named it first
    for flag, path in [*(files or {}).items(), *(dirs or {}).items()]:
        if path is None or str(path) == "-" or str(path) in STREAM_OUTPUTS:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise ConfigError(f"{flag} {path}: {seen[key]} writes there too; give each output its own path")
        seen[key] = flag
    for flag, path in (files or {}).items():
        if path is None or str(path) == "-":
            continue
        _check(flag, Path(path), is_dir=False)
        if flag == "--plot" and Path(path).suffix.lower() not in PLOT_SUFFIXES and not _special(Path(path)):
            raise ConfigError(f"--plot {path}: use a .png, .svg or .pdf file name")
    for flag, path in (dirs or {}).items():
        if path is not None:
            _check(flag, Path(path), is_dir=True)


def _special(path: Path) -> bool:
    try:
        import stat

        return not stat.S_ISREG(os.stat(path).st_mode) and not stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _output_kind(path: Path) -> str | None:
    """The kind of an output path that is refused (a FIFO nobody reads blocks the write for ever,
    /dev/full fails it): a FIFO, socket or device other than the process's own standard streams
    and /dev/null (io.STREAM_OUTPUTS)."""
    if str(path) in STREAM_OUTPUTS:
        return None
    return special_kind(path)


def _check(flag: str, path: Path, *, is_dir: bool) -> None:
    owner = written_input(path)
    if owner is not None:
        raise ConfigError(f"{flag} {path}: is (inside) an input of this command ({owner}); write it elsewhere")
    kind = _output_kind(path)
    if kind is not None:
        want = "a directory" if is_dir else "a regular file name (or '-' for standard output)"
        raise ConfigError(f"{flag} {path}: is {kind}; give {want}")
    if is_dir:
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{flag} {path}: exists and is not a directory; give a directory")
    elif path.is_dir():
        raise ConfigError(f"{flag} {path}: is a directory; give a file name")
    parent = path if is_dir and path.exists() else _existing_ancestor(path.parent)
    if parent is not None and not parent.is_dir():
        raise ConfigError(f"{flag} {path}: {parent} is not a directory")
    if (
        parent is not None
        and not os.access(parent, os.W_OK | os.X_OK)
        and not (path.exists() and os.access(path, os.W_OK))
    ):
        raise ConfigError(f"{flag} {path}: {parent} is not writable; choose another path")


def _existing_ancestor(path: Path) -> Path | None:
    path = Path(os.path.abspath(path))
    while not path.exists():
        if path.parent == path:
            return None
        path = path.parent
    return path

"""Atomic, versioned result files.

Every file specbench saves carries a schema version; loaders refuse other versions with a message
that names the file (asv's ``load_json(path, api_version)``). Writes go to a temp file in the same
directory and are renamed into place, so a crash never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator

from specbench.errors import InputError
from specbench.safe_yaml import loads_json

SCHEMA_VERSION = 1


# Inputs of the running command (run directories, files): never written to. The CLI registers
# them (specbench.cli.outputs.guard_outputs); a write inside one is refused (InputError, exit 2).
_PROTECTED: list[Path] = []


def cache_root() -> Path:
    """specbench's cache: ``$SPECBENCH_CACHE``, else ``~/.cache/specbench``."""
    base = os.environ.get("SPECBENCH_CACHE")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "specbench"


def cache_path(name: str, override_env: str) -> Path | None:
    """A cache entry: ``$override_env`` when set (``off``: None, no cache), else ``cache_root() / name``."""
    explicit = os.environ.get(override_env)
    if explicit == "off":
        return None
    return Path(explicit).expanduser() if explicit else cache_root() / name


def protect_inputs(paths) -> None:
    """Refuse, for the rest of this process, every write to or inside any of ``paths``."""
    for p in paths:
        if p is not None and str(p) != "-" and Path(p).exists():
            _PROTECTED.append(Path(os.path.realpath(p)))


def clear_protected() -> None:
    _PROTECTED.clear()


def written_input(path: Path) -> Path | None:
    """The protected input that ``path`` is (or lies in), if any."""
    real = Path(os.path.realpath(path))
    return next((p for p in _PROTECTED if real == p or real.is_relative_to(p)), None)


# Outputs written in place, never replaced: the process's own standard streams, and /dev/null (a
# discarded output). Any other FIFO, socket or device is refused as an output (a FIFO nobody reads
# would block the write for ever, /dev/full fail it half-way): specbench.cli.outputs refuses one
# before any work, atomic_write_bytes at the write.
STREAM_OUTPUTS = (
    "-",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd/1",
    "/dev/fd/2",
    "/proc/self/fd/1",
    "/proc/self/fd/2",
    "/dev/null",
)


class StandardStream(str):
    """What an OSError names (its ``filename``) when the write that failed was to the process's own
    standard output or error: set where that stream is written (here, and around sys.stdout in
    specbench.cli.common), never inferred from a missing name (a direct ``write()`` to any other
    file fails without one). A path a user gives is a plain str, never one of these."""


STANDARD_OUTPUT = StandardStream("standard output")
STANDARD_ERROR = StandardStream("standard error")


def on_stream(exc: OSError, stream: StandardStream) -> OSError:
    """``exc``, named as a failure of ``stream`` unless it already names a file."""
    if exc.filename is None:
        exc.filename = stream
    return exc


def failed_stream(exc: BaseException) -> StandardStream | None:
    """The standard stream whose write ``exc`` is the failure of (:func:`on_stream`), if any."""
    name = getattr(exc, "filename", None) if isinstance(exc, OSError) else None
    return name if isinstance(name, StandardStream) else None


def _own_stream(name: str) -> tuple[Any, StandardStream] | None:
    """``(sys.stdout or sys.stderr, which)`` when ``name`` is one of :data:`STREAM_OUTPUTS` naming
    the process's own stream (every spelling of it: ``/dev/fd/1`` is standard output as ``-`` is,
    and its failures are standard output's: a reader gone, ``| head``, is no error), else None."""
    if name in ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
        return sys.stdout, STANDARD_OUTPUT
    if name in ("/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"):
        return sys.stderr, STANDARD_ERROR
    return None


def _write_all(fh: Any, chunk: bytes | bytearray | memoryview) -> None:
    """Write all of ``chunk``: a buffered write into a pipe whose reader left returns the count the
    pipe took (65,536 of 106,919 bytes seen) and raises nothing; the next write raises the EPIPE."""
    view = memoryview(chunk).cast("B")
    while view:
        n = fh.write(view)
        if n is None:  # a writer that does not count (not a file's): it took it all
            return
        if n <= 0:
            raise OSError(errno.EIO, "the output took no bytes")
        view = view[n:]


def _writes_through(path: Path) -> bool:
    """Whether ``path`` must be written in place: ``-``, a FIFO, a device or other special file,
    or a link into /dev or /proc (``/dev/stdout``). Replacing those would destroy them."""
    if str(path) == "-":
        return True
    try:
        st = os.stat(path)  # follows links
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        return True
    # /dev/stdout -> /proc/self/fd/1 -> the file stdout was redirected to: realpath would name that
    # file, and replacing it would orphan the process's stdout. Judge by the link itself.
    special = ("/dev/", "/proc/")
    return path.is_symlink() and (os.path.abspath(path).startswith(special) or os.readlink(path).startswith(special))


def _new_file_mode() -> int:
    # What open() would give a new file: 0666 less the umask (mkstemp's 0600 hid reports from others).
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words for an error line."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def special_kind(path: Path | str) -> str | None:
    """The kind of ``path`` (links followed) when it exists and is neither a regular file nor a
    directory: a FIFO, socket or device, judged from ``os.stat`` without opening it (opening a FIFO
    for reading blocks until a writer comes; reading a device may never end)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else file_kind(mode)


def open_input(
    path: Path | str,
    what: str = "file",
    *,
    missing: str = "check the path",
    fix: str = "check the path and its permissions",
    error: type[Exception] = InputError,
) -> tuple[BinaryIO, int]:
    """``(binary file, size)`` of a regular file, the one way specbench opens an input file.

    Anything else is refused as ``error`` naming the path and its kind: decided from ``os.stat``
    before opening (a FIFO is never opened), then from ``fstat`` of a non-blocking open (the path
    may have been swapped in between). ``size`` is from that ``fstat``: read no more than it."""
    try:
        kind = file_kind(os.stat(path).st_mode)
        if kind != "a regular file":
            raise error(f"{path}: cannot read {what} (not a regular file: it is {kind}); give a regular file")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                kind = file_kind(st.st_mode)
                raise error(f"{path}: cannot read {what} (not a regular file: it is {kind}); give a regular file")
            return os.fdopen(fd, "rb"), st.st_size
        except BaseException:
            os.close(fd)
            raise
    except FileNotFoundError:
        raise error(f"{path}: {what} not found; {missing}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror or exc}); {fix}") from None
    except ValueError:  # a NUL in the path
        raise error(f"{path!r}: cannot read {what} (a NUL character in the path); {fix}") from None


def read_bytes(
    path: Path | str,
    what: str = "file",
    *,
    missing: str = "check the path",
    fix: str = "check the path and its permissions",
    error: type[Exception] = InputError,
    max_bytes: int | None = None,
) -> bytes:
    """The bytes of ``path``; for anything unreadable one line naming the file, raised as ``error``:
    ``<path>: <what> not found; <missing>`` or ``<path>: cannot read <what> (<why>); <fix>``.

    Opened by :func:`open_input`: a FIFO, socket, device or directory is refused naming its kind
    (it would block the read for ever, or never end), and no more than the size ``fstat`` gave
    is read: every read is of a regular file. ``max_bytes``: refuse a larger file before reading any of it."""
    fh, size = open_input(path, what, missing=missing, fix=fix, error=error)
    with fh:
        if max_bytes is not None and size > max_bytes:
            raise error(
                f"{path}: {what} of {size:,} bytes is over the limit of {max_bytes:,} bytes "
                f"(no run writes one that large: a damaged or foreign file); {fix}"
            )
        try:
            return fh.read(size)
        except OSError as exc:
            raise error(f"{path}: cannot read {what} ({exc.strerror or exc}); {fix}") from None


def read_text(
    path: Path | str,
    what: str = "file",
    *,
    missing: str = "check the path",
    fix: str = "check the path and its permissions",
    error: type[Exception] = InputError,
    errors: str = "strict",
    max_bytes: int | None = None,
) -> str:
    """:func:`read_bytes` decoded as UTF-8 (``errors`` as for ``bytes.decode``); text that is not
    UTF-8 is refused like an unreadable file."""
    data = read_bytes(path, what, missing=missing, fix=fix, error=error, max_bytes=max_bytes)
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError:
        raise error(f"{path}: cannot read {what} (not UTF-8 text); {fix}") from None


def atomic_write_bytes(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Write ``data`` (bytes, or chunks of them: a large file need not be held whole) to ``path``
    via a temp file and a rename, so a crash never leaves half a file.

    A symlink keeps pointing where it did (its target is replaced); ``-``, FIFOs and devices
    (``/dev/stdout``) are written through; an input of the running command is refused. New
    files get the mode ``open()`` would give them (umask), replaced files keep theirs."""
    path = Path(path)
    if _stop.marked_depth:
        honour_stop()  # an output of a marked set: a stop asked for is not written past
    owner = written_input(path)
    if owner is not None:
        raise InputError(f"{path}: is an input of this command ({owner}); write the output elsewhere")
    chunks = [data] if isinstance(data, (bytes, bytearray, memoryview)) else data
    if _writes_through(path):
        own = _own_stream(str(path))
        if own is not None:  # the process's own stream: same offset, nothing truncated
            stream, which = own
            try:
                stream.flush()
                for chunk in chunks:
                    _write_all(stream.buffer, chunk)
                stream.buffer.flush()
            except OSError as exc:
                on_stream(exc, which)
                raise
            return
        kind = special_kind(path)
        if kind is not None and str(path) not in STREAM_OUTPUTS:
            raise InputError(f"{path}: is {kind}; write the output to a regular file (or '-' for standard output)")
        try:
            with open(path, "ab") as fh:  # /dev/null, or a /proc link to a file ("a": not truncated)
                for chunk in chunks:
                    fh.write(chunk)
        except OSError as exc:  # named: the file it is (a stream's failure is named so above)
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = _new_file_mode()
    # The temp's name is known before it exists: a signal arriving inside mkstemp (after it created
    # the file, before it returned the name) left a `.x.tmp` nothing could remove.
    tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:  # never created (the open failed), or already renamed
            pass
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


INCOMPLETE = "INCOMPLETE"


# A stop asked for by a signal (SIGTERM/SIGHUP/SIGINT, see cli.common.sigterm_as_interrupt). The
# signal handler raises KeyboardInterrupt where the main thread is, and C extension code can swallow
# it (seen: numpy's dtype comparison under pandas clears the error, ~2 reports in 100 SIGTERMed
# while rendering), so the stop is also kept here and honoured at the next output write of a marked
# set and when the command ends: a lost interrupt never becomes a whole-looking set and exit 0.
class _Stop:
    requested = False
    marked_depth = 0  # how many marked_incomplete blocks are open


_stop = _Stop()


def request_stop() -> None:
    _stop.requested = True


def clear_stop() -> None:
    _stop.requested = False


def honour_stop() -> None:
    """Raise KeyboardInterrupt once if a stop was asked for and not yet acted on."""
    if _stop.requested:
        _stop.requested = False
        raise KeyboardInterrupt


@contextlib.contextmanager
def marked_incomplete(out_dir: Path, command: str) -> Iterator[None]:
    """While inside, ``out_dir`` holds a file ``INCOMPLETE`` saying its files are a partial set:
    written before the first output, removed only after the last one is written. Each file is
    atomic, but a set cut short (Ctrl-C, SIGTERM, SIGHUP, a full disk) would otherwise look whole:
    summary.md beside last time's figures, or no figures at all, with nothing to say so."""
    marker = Path(out_dir) / INCOMPLETE
    atomic_write_text(
        marker,
        f"specbench {command} was writing this directory and did not finish (interrupted or "
        "failed): the files here are a partial set, some may be from an earlier run. Run the "
        "command again; this file is removed when every output is written.\n",
    )
    _stop.marked_depth += 1
    try:
        yield
        honour_stop()  # a stop whose interrupt was lost: the set stays marked
    finally:
        _stop.marked_depth -= 1
    marker.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def save_json(path: Path, payload: dict[str, Any], *, schema_version: int = SCHEMA_VERSION) -> None:
    """Write ``payload`` with a ``schema_version`` key, atomically."""
    body = {"schema_version": schema_version, **{k: v for k, v in payload.items() if k != "schema_version"}}
    atomic_write_text(path, json.dumps(body, indent=2, sort_keys=False, default=_json_default) + "\n")


# manifest.json, cell.json, acceptance.json, summary.json: a day-long cell logging every 10 s writes
# about 2 MB of acceptance.json; parsing 32 MB of JSON takes about a second and ~0.5 GB.
MAX_JSON_BYTES = 32 * 1024 * 1024


def load_json(path: Path, *, schema_version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """Read a file written by :func:`save_json`, refusing truncated, corrupt or other-version files."""
    path = Path(path)
    text = read_text(
        path,
        missing="is this a specbench run directory?",
        fix="re-run the cell or restore the file",
        max_bytes=MAX_JSON_BYTES,
    )
    try:
        data = loads_json(text, path, fix="fix that field or re-run the cell (specbench run --resume)")
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: corrupt or truncated JSON (line {exc.lineno}, column {exc.colno}); "
            "re-run the cell (specbench run --resume) or delete the file"
        ) from None
    except ValueError as exc:  # nested too deeply
        raise InputError(f"{path}: {exc}; re-run the cell or delete the file") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(data).__name__}")
    found = data.get("schema_version")
    # Strictly an int: JSON true == 1 and 1.0 == 1 in Python, but neither was written by specbench.
    if type(found) is not int or found != schema_version:
        raise InputError(
            f"{path}: schema_version {found!r}, this specbench reads {schema_version}; "
            "re-run with a matching specbench version"
        )
    return data


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, default=_json_default) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [row for _, row in read_jsonl_lines(path)]


def read_jsonl_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line, for errors that name the line.

    Lines end at ``\\n`` only (JSON Lines): str.splitlines would also cut at U+2028, U+0085 and
    the other line breaks JSON allows raw inside a string. A number that is not finite (``NaN``,
    ``Infinity``, ``1e400``: JSON has none, Python's reader accepts them) or past any float
    (``10^400``) is refused naming file:line:field (safe_yaml.loads_json, the one JSON reader): a
    count of NaN would otherwise blank a statistic without a word."""
    path = Path(path)
    rows = []
    lines = read_text(path, fix="re-run the cell or delete the file").split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = loads_json(line, path, line=n, fix=_FIX_LINE)
        except ValueError:
            raise InputError(f"{path}:{n}: corrupt JSON line; re-run the cell or delete the file") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{n}: expected a JSON object per line; re-run the cell or delete the file")
        rows.append((n, row))
    return rows


_FIX_LINE = "fix or drop that line (or re-run the command that wrote the file)"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")

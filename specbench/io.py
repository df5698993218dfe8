"""Atomic, versioned result files.

Every file specbench saves carries a schema version; loaders refuse other versions with a message
that names the file (asv's ``load_json(path, api_version)``). Writes go to a temp file in the same
directory and are renamed into place, so a crash never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from specbench.errors import InputError
from specbench.safe_yaml import loads_json

SCHEMA_VERSION = 1


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def save_json(path: Path, payload: dict[str, Any], *, schema_version: int = SCHEMA_VERSION) -> None:
    """Write ``payload`` with a ``schema_version`` key, atomically."""
    body = {"schema_version": schema_version, **{k: v for k, v in payload.items() if k != "schema_version"}}
    atomic_write_text(path, json.dumps(body, indent=2, sort_keys=False, default=_json_default) + "\n")


def load_json(path: Path, *, schema_version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """Read a file written by :func:`save_json`, refusing truncated, corrupt or other-version files."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found; is this a specbench run directory?") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc}); re-run the cell or restore the file") from None
    try:
        data = loads_json(text)
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
    path = Path(path)
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read as UTF-8 text ({exc.__class__.__name__}); re-run the cell "
                         "or delete the file") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except ValueError:
            raise InputError(f"{path}:{n}: corrupt JSON line; re-run the cell or delete the file") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{n}: expected a JSON object per line; re-run the cell or delete the file")
        rows.append(row)
    return rows


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")

"""The exit codes: one table (specbench/errors.py EXIT_CODES, one name per meaning), README's
"Exit codes" table the same codes, and only cli/ ends the process (the core returns or raises)."""

from __future__ import annotations

import re
from pathlib import Path

from specbench import errors

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "specbench"
# What ends a process: only the CLI chooses the exit code and exits.
ENDS_PROCESS = re.compile(r"\bsys\.exit\s*\(|\btyper\.Exit\b|\braise\s+SystemExit\b|\bos\._exit\s*\(")


def _modules_outside_cli() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "cli" not in p.relative_to(PACKAGE).parts[:1])


def _lines_outside_cli(pattern: re.Pattern) -> list[tuple[str, int, str]]:
    """``(path, line number, line)`` of every line outside specbench/cli/ that ``pattern`` finds."""
    found = []
    for path in _modules_outside_cli():
        rel = path.relative_to(ROOT).as_posix()
        lines = path.read_text(encoding="utf-8").splitlines()
        found += [(rel, n, line.strip()) for n, line in enumerate(lines, 1) if pattern.search(line)]
    return found


def test_only_cli_ends_the_process():
    found = {f"{rel}:{n}": line for rel, n, line in _lines_outside_cli(ENDS_PROCESS)}
    assert not found, f"outside specbench/cli/, return or raise and let the CLI exit: {found}"


def test_only_cli_names_an_exit_code():
    """The core returns outcomes (a compare's verdict, how a run ended) and never picks a code:
    specbench/cli/exits.py maps each outcome to its code (errors.py alone defines them)."""
    names_a_code = re.compile(r"\bEXIT_(?!CODES\b)[A-Z_]+\b")
    found = [f"{rel}:{n}: {line}" for rel, n, line in _lines_outside_cli(names_a_code) if rel != "specbench/errors.py"]
    assert not found, f"return an outcome; specbench/cli/exits.py maps it to its code: {found}"


def test_exit_codes_are_named_only_in_errors():
    # One definition: no module assigns an EXIT_ constant or imports one under another name.
    defines = re.compile(r"^\s*EXIT_\w+\s*(:[^=]*)?=[^=]|\bimport\b.*\bEXIT_\w+\s+as\b|^\s*__all__\s*=.*EXIT_")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "errors.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if defines.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, f"exit codes are defined in specbench/errors.py only: {found}"


def test_the_table_names_every_constant_once():
    names = [name for name, *_ in errors.EXIT_CODES]
    constants = {k for k in vars(errors) if k.startswith("EXIT_") and k != "EXIT_CODES"}
    assert sorted(names) == sorted(constants) and len(set(names)) == len(names)
    assert all(getattr(errors, name) == code for name, code, *_ in errors.EXIT_CODES)
    # A code two meanings share is one per command, never two meanings in one command.
    pairs = [(code, command) for _, code, command, _ in errors.EXIT_CODES]
    assert len(set(pairs)) == len(pairs)
    assert all(command is not None for code, command in pairs if sum(c == code for c, _ in pairs) > 1)


def test_readme_exit_codes_are_the_table():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.M))
    assert sorted(int(c) for c in rows) == sorted({code for _, code, _, _ in errors.EXIT_CODES})
    for _, code, command, meaning in errors.EXIT_CODES:
        row = rows[str(code)]
        assert meaning in row, (code, meaning, row)
        if command is not None:
            assert f"`{command}`" in row, (code, command, row)

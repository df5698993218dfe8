"""Error types. The core raises these; the CLI turns them into one red line and an exit code."""

from __future__ import annotations

# Exit codes: the one definition, one name for each meaning (README "Exit codes", tested against
# EXIT_CODES in tests/test_exit_codes.py). Only cli/ imports them, under these names: the core
# returns outcomes, specbench/cli/exits.py maps each to its code, and only cli/ ends the process
# with one. CI reads 1 as "regression", so nothing else may end in 1.
EXIT_OK = 0
EXIT_REGRESSION = 1  # compare: a gate failed
EXIT_USAGE = 2  # bad input, config or flag: a SpecbenchError, one line naming what to fix
EXIT_FAILED_CELLS = 3  # run: some cells failed (the others are saved)
EXIT_INCONCLUSIVE = 3  # compare: no gate failed but some checks are inconclusive (never a pass)
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGTERM / SIGHUP (128 + SIGINT, the shell's convention)

# (name, code, the command it is of or None for every command, meaning): 3 has two names because
# it means two things, one per command that can end with it.
EXIT_CODES: tuple[tuple[str, int, str | None, str], ...] = (
    ("EXIT_OK", EXIT_OK, None, "ok"),
    ("EXIT_REGRESSION", EXIT_REGRESSION, "compare", "regression verdict"),
    ("EXIT_USAGE", EXIT_USAGE, None, "usage, config or input error"),
    ("EXIT_FAILED_CELLS", EXIT_FAILED_CELLS, "run", "finished with failed cells"),
    ("EXIT_INCONCLUSIVE", EXIT_INCONCLUSIVE, "compare", "a check it could not decide"),
    ("EXIT_INTERRUPTED", EXIT_INTERRUPTED, None, "interrupted"),
)


class SpecbenchError(Exception):
    """Base class for every error specbench reports to a user (exit code 2 by default).

    The message must say what went wrong *and* what to do next, in one line.
    """

    exit_code = EXIT_USAGE


class ConfigError(SpecbenchError):
    """A study config, gate file or flag is invalid. Message names the file and field path."""


class InputError(SpecbenchError):
    """An input file (log, result file, run directory) is missing, unreadable or of a wrong version."""


class DependencyError(SpecbenchError):
    """An optional dependency (vLLM, Ray, llmperf) is missing; the message names the extra to install."""


class ServerError(SpecbenchError):
    """A vLLM server failed to start or died; the message carries its exit status and log tail."""

"""Error types. The core raises these; the CLI turns them into one red line and an exit code."""

from __future__ import annotations

# Exit codes, the one definition (README "Exit codes"; the CLI and the executors use these names).
EXIT_OK = 0
EXIT_REGRESSION = 1  # compare: a gate failed
EXIT_USAGE = 2  # bad input, config or flag: a SpecbenchError, one line naming what to fix
EXIT_FAILED_CELLS = 3  # run: some cells failed (the others are saved)
EXIT_INCONCLUSIVE = 3  # compare: no gate failed but some checks are inconclusive
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGTERM (128 + SIGINT, the shell's convention)


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

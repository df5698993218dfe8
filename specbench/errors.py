"""Error types. The core raises these; the CLI turns them into one red line and an exit code."""

from __future__ import annotations


class SpecbenchError(Exception):
    """Base class for every error specbench reports to a user (exit code 2 by default).

    The message must say what went wrong *and* what to do next, in one line.
    """

    exit_code = 2


class ConfigError(SpecbenchError):
    """A study config, gate file or flag is invalid. Message names the file and field path."""


class InputError(SpecbenchError):
    """An input file (log, result file, run directory) is missing, unreadable or of a wrong version."""


class DependencyError(SpecbenchError):
    """An optional dependency (vLLM, Ray, llmperf) is missing; the message names the extra to install."""


class ServerError(SpecbenchError):
    """A vLLM server failed to start or died; the message carries its exit status and log tail."""

"""Which write failed: standard output's (named so where it is written: io's stream outputs,
cli.common's _OwnStdout and consoles) or some other file's, met by a direct write() without a
name (fixtures/build.py, serve/server.py). Only the first is "writing the output to standard output"."""

from __future__ import annotations

import contextlib
import errno
import io

import pytest

from specbench.cli import common
from specbench.cli.main import run_cli
from specbench.io import STANDARD_OUTPUT, on_stream


def _invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def silenced(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(common, "silence_stdout", lambda: calls.append(1))
    return calls


def test_a_full_disk_met_by_a_direct_write_is_not_standard_outputs(monkeypatch, silenced, tmp_path):
    """Review: an OSError without a filename was taken for standard output's ("No space left on
    device writing the output to standard output"), and standard output was pointed at /dev/null."""

    def direct_write():
        with open("/dev/full", "w") as fh:  # a direct write, as fixtures/build.py's: no filename
            fh.write("x")

    monkeypatch.setenv("SPECBENCH_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setattr("specbench.cli.envs_cmd.environments", direct_write)
    code, out, err = _invoke(["envs", "list"])
    assert code == 2 and err == "error: No space left on device; free space and re-run\n", err
    assert not silenced


def test_describing_a_failure_changes_nothing(silenced):
    """describe_failure only describes: standard output is silenced where a failure is reported."""
    for exc in (
        on_stream(BrokenPipeError(errno.EPIPE, "Broken pipe"), STANDARD_OUTPUT),
        on_stream(OSError(errno.ENOSPC, "No space left on device"), STANDARD_OUTPUT),
        OSError(errno.ENOSPC, "No space left on device"),
    ):
        common.describe_failure(exc)
    assert not silenced
    assert common.describe_failure(on_stream(BrokenPipeError(errno.EPIPE, "Broken pipe"), STANDARD_OUTPUT)) == (0, "")
    assert common.describe_failure(on_stream(OSError(errno.EIO, "Input/output error"), STANDARD_OUTPUT)) == (
        2,
        "Input/output error writing the output to standard output; redirect it to a file",
    )
    assert common.report_failure(on_stream(OSError(errno.ENOSPC, "No space"), STANDARD_OUTPUT)) == 2
    assert silenced == [1]  # reported: what is left in stdout's buffer would fail again at exit

"""specbench/io.open_input and the CLI's input and output checks: a FIFO, socket, device or
directory given where a file is read (or written) is refused naming its kind, never waited on.
Each command runs in a subprocess with a timeout: on the old code these hang."""

from __future__ import annotations

import inspect
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from specbench import io
from specbench.errors import InputError
from specbench.io import read_bytes, read_text
from specbench.results import store

BOUND_S = 30


def _special(tmp_path: Path, kind: str) -> Path:
    if kind == "fifo":
        p = tmp_path / "pipe"
        os.mkfifo(p)
        return p
    if kind == "socket":
        p = tmp_path / "sock"
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
        return p
    if kind == "directory":
        return tmp_path
    return Path(kind)  # a device


KINDS = {
    "fifo": "a FIFO (named pipe)",
    "socket": "a socket",
    "/dev/zero": "a character device",
    "/dev/urandom": "a character device",
    "directory": "a directory",
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_read_bytes_refuses_what_is_not_a_regular_file_naming_its_kind(kind, tmp_path):
    path = _special(tmp_path, kind)
    for read in (read_bytes, read_text):
        want = f"{path}: cannot read gate file (not a regular file: it is {KINDS[kind]}); give a regular file"
        with pytest.raises(InputError, match=re.escape(want)):
            read(path, "gate file")


def test_reads_are_bounded_by_the_size_fstat_gives(tmp_path, monkeypatch):
    f = tmp_path / "a.txt"
    f.write_bytes(b"0123456789")
    real_fstat = os.fstat

    class Small:
        def __init__(self, st):
            self._st = st

        def __getattr__(self, name):
            return 4 if name == "st_size" else getattr(self._st, name)

    monkeypatch.setattr(os, "fstat", lambda fd: Small(real_fstat(fd)))
    assert read_bytes(f) == b"0123"


def _cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specbench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        stdin=subprocess.DEVNULL,
        **kw,
    )


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["fifo", "socket", "/dev/zero"])
@pytest.mark.parametrize("command", ["parse", "report"])
def test_parse_and_report_refuse_a_special_input_by_its_kind(command, kind, tmp_path):
    path = _special(tmp_path, kind)
    argv = [command, path] + (["--out", tmp_path / "rep", "--no-plots"] if command == "report" else [])
    res = _cli(*argv)
    errors = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert res.returncode == 2 and len(errors) == 1, res.stderr
    assert str(path) in errors[0] and KINDS[kind] in errors[0]
    assert not (tmp_path / "rep").exists()


@pytest.mark.heavy
@pytest.mark.parametrize("flag", ["--gate-file", "--noise-floor"])
def test_option_files_that_are_fifos_are_refused(flag, tmp_path):
    """compare's option files are inputs too (here, before the runs are read)."""
    fifo = _special(tmp_path, "fifo")
    log = tmp_path / "a.log"
    log.write_text("x\n")
    res = _cli("compare", log, log, flag, fifo)
    assert res.returncode == 2 and str(fifo) in res.stderr and "FIFO" in res.stderr, res.stderr


@pytest.mark.heavy
def test_an_output_fifo_is_refused_before_any_work(tmp_path):
    fifo = _special(tmp_path, "fifo")
    log = tmp_path / "a.log"
    log.write_text("nothing\n")  # no metrics: reading it would be exit 2 too, but later
    res = _cli("report", log, "--out", fifo)
    assert res.returncode == 2 and "--out" in res.stderr and "FIFO" in res.stderr, res.stderr
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(fifo)}
    res = _cli("compare", log, log, env=env)
    assert res.returncode == 2 and "GITHUB_STEP_SUMMARY" in res.stderr and "FIFO" in res.stderr, res.stderr


@pytest.mark.heavy
def test_standard_input_is_still_read_as_a_pipe(tmp_path):
    line = (
        "SpecDecoding metrics: Draft acceptance rate: 58.4%, Mean acceptance length: 2.75, "
        "Accepted: 163 tokens, Drafted: 279 tokens, Per-position acceptance rate: 0.882, 0.559, 0.312\n"
    )
    for name in ("-", "/dev/stdin"):
        res = subprocess.run(
            [sys.executable, "-m", "specbench", "parse", name, "--format", "jsonl"],
            input=line,
            capture_output=True,
            text=True,
            timeout=BOUND_S,
        )
        assert res.returncode == 0 and len(res.stdout.splitlines()) == 1, res.stderr


@pytest.mark.heavy
def test_a_fifo_inside_a_sweep_directory_is_refused_not_waited_on(tmp_path):
    """A FIFO named like a `vllm bench sweep` result (run=0.json) inside the directory given to
    report or compare: read through the one opener, exit 2 naming it (it blocked before)."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    os.mkfifo(sweep / "run=0.json")
    res = _cli("report", str(sweep), "--out", str(tmp_path / "out"), "--no-plots")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "run=0.json" in res.stderr and "FIFO" in res.stderr


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("reader", ["load_json", "read_jsonl_lines", "load_summary"])
def test_the_run_directory_readers_refuse_a_special_file_in_bounded_time(reader, kind, tmp_path):
    # The readers that once asked for regular_only=True (a parameter read_bytes took and dropped):
    # every read is regular-only now, and these three still refuse a FIFO (never opened, so no
    # wait for a writer) and a device (never read to its end).
    read = {"load_json": io.load_json, "read_jsonl_lines": io.read_jsonl_lines, "load_summary": store.load_summary}
    path = _special(tmp_path, kind)
    done: list[BaseException] = []
    worker = threading.Thread(target=lambda: done.append(_raised(read[reader], path)), daemon=True)
    worker.start()
    worker.join(BOUND_S)
    assert done, f"{reader}({path}) still reading after {BOUND_S} s"
    assert isinstance(done[0], InputError) and "not a regular file" in str(done[0]), done[0]


def _raised(read, path) -> BaseException:
    try:
        read(path)
    except BaseException as exc:  # noqa: BLE001 - the test looks at whatever it raised
        return exc
    return AssertionError(f"{path} was read")


def test_read_bytes_and_read_text_take_no_regular_only():
    # Every read is regular-only; a parameter that says otherwise would be one that is dropped.
    assert all("regular_only" not in inspect.signature(f).parameters for f in (read_bytes, read_text))

"""specbench/io.atomic_write_*: umask, symlinks, special files and inputs (real files, a real FIFO,
real subprocesses for stdout)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from specbench import io as sbio
from specbench.errors import InputError


@pytest.fixture(autouse=True)
def _no_leftover_protection():
    yield
    sbio._PROTECTED.clear()


def test_new_files_get_the_umask_mode_and_replaced_files_keep_theirs(tmp_path):
    old = os.umask(0o022)
    try:
        sbio.atomic_write_text(tmp_path / "a.md", "x")
        assert stat.S_IMODE(os.stat(tmp_path / "a.md").st_mode) == 0o644  # readable by others, as open() gives
        os.chmod(tmp_path / "a.md", 0o600)
        sbio.atomic_write_text(tmp_path / "a.md", "y")
        assert stat.S_IMODE(os.stat(tmp_path / "a.md").st_mode) == 0o600
    finally:
        os.umask(old)


def test_a_symlink_stays_a_symlink(tmp_path):
    target = tmp_path / "real.md"
    target.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    sbio.atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_fifo_nobody_reads_is_refused_as_an_output_not_waited_on(tmp_path):
    """Issue 43, item 1: a FIFO (or a device other than the standard streams and /dev/null) as an
    output is refused naming its kind: written through, a FIFO nobody reads blocked for ever. It is
    neither replaced by a file nor opened. In a subprocess with a timeout: the old code hangs."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code = f"from specbench.io import atomic_write_text; atomic_write_text({str(fifo)!r}, 'x')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "is a FIFO (named pipe)" in proc.stderr, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(InputError, match="is a character device"):
        sbio.atomic_write_text(Path("/dev/full"), "x")
    sbio.atomic_write_text(Path("/dev/null"), "discarded")  # a discarded output stays allowed


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_dash_and_dev_stdout_are_written_through(target):
    # A subprocess, so /dev/stdout is that process's pipe: it must not be replaced by a file
    # (as root it used to be, breaking /dev/stdout for the whole machine).
    code = f"from specbench.io import atomic_write_text; atomic_write_text({target!r}, 'hello\\n')"
    before = os.lstat("/dev/stdout")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello\n"
    after = os.lstat("/dev/stdout")
    assert stat.S_ISLNK(after.st_mode) == stat.S_ISLNK(before.st_mode)


def test_inputs_of_the_command_are_never_written(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    sbio.protect_inputs([run])
    with pytest.raises(InputError, match="is an input of this command"):
        sbio.atomic_write_text(run / "manifest.json", "overwritten")
    assert (run / "manifest.json").read_text() == "{}"
    sbio.atomic_write_text(tmp_path / "elsewhere.json", "ok")


def test_write_errors_name_the_file_asked_for_not_the_temp_file():
    with pytest.raises(OSError) as exc:
        sbio.atomic_write_text("/proc/specbench-x", "y")  # /proc takes no new files, even from root
    assert exc.value.filename == "/proc/specbench-x"


def test_dev_stdout_redirected_to_a_file_keeps_later_output(tmp_path):
    # stdout redirected to a file: replacing the file behind /dev/stdout would send every later
    # line to an unlinked inode (lost); writing through keeps them in order.
    code = (
        "import sys; from specbench.io import atomic_write_text; print('before', flush=True); "
        "atomic_write_text('/dev/stdout', 'report\\n'); print('after', flush=True)"
    )
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        r = subprocess.run([sys.executable, "-c", code], stdout=fh, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "before\nreport\nafter\n"
    assert os.path.islink("/dev/stdout")


CI_GATE = Path(__file__).resolve().parents[1] / "results" / "reruns"


@pytest.mark.heavy
@pytest.mark.parametrize("target", ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_a_reader_gone_from_a_stream_output_is_exit_0_and_silent(target):
    """Review: ``compare A B --json /dev/fd/1 | head -c10`` ended in exit 2, "error: /dev/fd/1:
    Broken pipe" (the write error named the path, so it was no longer the process's own stream),
    and with ``-`` the buffered write took what the pipe held (65,536 of ~107,000 bytes), raised
    nothing, and the rest was dropped without a word. A real pipe whose reader takes 10 bytes and
    leaves: every spelling of standard output ends as ``| head`` on standard output does, exit 0."""
    argv = ["compare", CI_GATE / "ci-gate-6cells-a", CI_GATE / "ci-gate-6cells-b", "-q", "--json", target]
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("SPECBENCH_DEBUG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "specbench", *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=CI_GATE.parents[1],
        env=env,
        bufsize=0,
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = os.read(proc.stdout.fileno(), 10)  # the JSON is ~107 KB, more than a pipe holds (64 KiB)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert head.startswith(b"{") and err == ""

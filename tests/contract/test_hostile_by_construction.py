"""Hostile input by construction (issue 58, item 5): four classes, each made safe in one place, held
at every command and every path-bearing argument (hostile_cases.py; the seeded sweep of
test_hostile_generated.py draws hundreds more of each, slow):

1. a user string in any message (a path, an argument): render.format.shown_text / user_text /
   user_line escape Rich markup, show control characters, hide credentials (redact.redact_message);
2. a number in a JSON or JSON Lines file: safe_yaml.loads_json refuses NaN, infinities, 1e400,
   10^400 and anything of magnitude 1e100 or more, naming file:line:field (exit 2);
3. standard output that cannot be written (a full disk, EIO): exit 2 with one line naming it; a
   reader gone (``| head``) is no error; standard error that cannot be written changes no code;
4. here, one of each at every slot (in-process, the fast loop); real processes at the end (heavy).
"""

from __future__ import annotations

import os
import pty
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_cases import (
    MARKUP_NAMES,
    NUMBER_SLOTS,
    credential_names,
    n_stream_cases,
    number_cases,
    path_case,
    path_slots,
    stream_cases,
)
from test_contract import ROOT, _clean_env  # noqa: F401
from test_hostile_generated import _run_case, make_inputs

from specbench.errors import InputError
from specbench.safe_yaml import loads_json


@pytest.fixture(scope="module")
def inp(tmp_path_factory):
    return make_inputs(tmp_path_factory.mktemp("in58"))


@pytest.fixture(autouse=True)
def _own_envs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_ENVS_DIR", str(tmp_path / "envs"))  # `envs list` reads nothing of the user's


def _run_all(cases, monkeypatch, inputs) -> None:
    failures = []
    for i, case in enumerate(cases):
        try:
            _run_case(case, i, monkeypatch, inputs, [])
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0] + " | " + " ".join(str(exc).splitlines()[1:3])[:300])
    assert not failures, f"{len(failures)} of {len(cases)} broke the contract:\n" + "\n".join(failures)


# -- 1. user strings: markup, control characters and credentials in every path-bearing argument ------
N_SLOTS = 19


@pytest.mark.parametrize("k", range(N_SLOTS))
def test_a_hostile_name_at_every_path_slot_is_text_and_no_secret_is_shown(k, inp, tmp_path, monkeypatch):
    """Before: markup in a path parse or validate read ("unexpected MarkupError" as a run's
    results_dir, report's "wrote ... to [bold]x" losing the brackets), a URL's password or an hf_/sk-
    token given as a path echoed on stdout or stderr (parse's title, validate's "ok" line, report's
    "wrote" line, compare's warnings, the dry run's plan)."""
    slots = path_slots(inp, tmp_path / "o")
    assert len(slots) == N_SLOTS
    slot = slots[k]
    creds = credential_names(random.Random(k))
    cases = []
    for j in range(3):  # three names a slot, every name at some slot
        markup = MARKUP_NAMES[(3 * k + j) % len(MARKUP_NAMES)]
        cred, secret = creds[(3 * k + j) % len(creds)]
        for present in (True, False) if slot[1] not in ("out", "missing") else (True,):  # else one case
            where = tmp_path / f"c{j}{int(present)}"
            cases.append(path_case("markup", slot, markup, present, [], inp, where / "m"))
            cases.append(path_case("credentials", slot, cred, present, [secret], inp, where / "k"))
    _run_all(cases, monkeypatch, [inp.run, inp.log, inp.config])


def test_the_one_function_hides_escapes_and_shows_control_characters():
    from specbench.render.format import shown_text, user_line

    line = user_line(
        "https://u:pw1234@h/a [bold]b[/bold] \x1b[31m\r\n\x00\x9b hf_abcdefghijklmnopqrstuv x?token=tok987"
    )
    assert "pw1234" not in line and "abcdefghijklmnopqrstuv" not in line and "tok987" not in line
    assert "\\[bold]" in line and "\\x1b" in line and "\\r\\n" in line and "\\x00" in line and "\\x9b" in line
    assert "\n" not in line and "\x1b" not in line
    assert shown_text("https:/u:pw1234@h/x: no such run") == "https:/u:***@h/x: no such run"  # pathlib's fold
    assert shown_text("x?api_key=k9k9k9: no such run") == "x?api_key=***: no such run"  # its ':' kept


def test_a_run_directory_with_markup_is_announced_as_written(capsys):
    """Before: a results_dir holding "[/x]" ended `specbench run` in "unexpected MarkupError" as
    the run directory was announced (after it was made)."""
    from types import SimpleNamespace

    from specbench.cli.run_cmd import _announce

    plan = SimpleNamespace(note=lambda **_: None, run_dir=Path("/r/[/x]/a\x1bb"), notes=["took [/y] from the run"])
    _announce(plan, False, ["# gate sizing for [/z]"], None)
    out = capsys.readouterr().out
    assert "/r/[/x]/a\\x1bb" in out and "[/y]" in out and "[/z]" in out


# -- 2. numbers in files ---------------------------------------------------------------------------
N_NUMBER_SLOTS = len(NUMBER_SLOTS)


@pytest.mark.parametrize("k", range(N_NUMBER_SLOTS))
def test_a_hostile_number_in_every_file_read_is_exit_2_naming_file_line_and_field(k, inp, tmp_path, monkeypatch):
    """Before: 10^400 in acceptance.json, summary.json or requests.jsonl's spec_decode counts, and
    1e300 tok/s in summary.json, ended report or compare in "unexpected OverflowError"; 10^400 in a
    /metrics scrape did so in parse."""
    every = number_cases(random.Random(k), inp, tmp_path, 3 * N_NUMBER_SLOTS)
    _run_all([c for i, c in enumerate(every) if i % N_NUMBER_SLOTS == k], monkeypatch, [inp.run])


@pytest.mark.parametrize(
    "text, where",
    [
        ('{\n  "a": 1,\n  "b": {\n    "c": [1, 1e400]\n  }\n}', "f.json:4: b.c[1] is inf, not a finite number"),
        ('{"a": NaN}', "f.json:1: a is nan, not a finite number"),
        ('{"n": ' + "1" + "0" * 400 + "}", "f.json:1: n is a 401-digit whole number, past any float"),
        ('{"n": ' + "9" * 5000 + "}", "f.json:1: n is a 5000-digit whole number, past any float"),
        ('{"s": "NaN 1e999", "t": 1e300}', "f.json:1: t is 1e300, past any count, time or rate (1e100 or more)"),
        ('{"a": 1e-400, "b": -Infinity}', "f.json:1: b is -inf, not a finite number"),
    ],
)
def test_the_one_json_reader_names_file_line_and_field(text, where):
    with pytest.raises(InputError, match="^" + re.escape(where)):
        loads_json(text, "f.json")
    assert loads_json('{"a": 1e-400, "b": 2.5, "s": "Infinity"}') == {"a": 0.0, "b": 2.5, "s": "Infinity"}


# -- 3. standard streams that cannot be written ------------------------------------------------------
def test_every_command_with_failing_standard_streams_keeps_the_contract(inp, tmp_path, monkeypatch):
    """Before: `--help` or `--version` into a pipe whose reader left ended in exit 1 (typer's own
    sys.exit(1), read by CI as a regression); a stderr that could not be written ended an error, and
    a report that succeeded, in 1 too; EIO on stdout said "check the path and its permissions"."""
    out = tmp_path / "o"
    _run_all(stream_cases(inp, out, n_stream_cases(inp, out)), monkeypatch, [inp.run])


def test_a_write_that_failed_leaves_nothing_for_the_next_invocation(inp, tmp_path):
    """In-process callers run many invocations: text rich could not write (stderr full, a reader
    gone) and the quiet a broken pipe sets must not reach the next one's streams."""
    from test_hostile_generated import invoke_streams

    warns = ["compare", inp.run, inp.run, "--resamples", "100", "--allow-inconclusive"]  # warns on stderr
    for stdout, stderr in (("", "ENOSPC"), ("EPIPE", ""), ("ENOSPC", "")):
        invoke_streams(warns, stdout, stderr)
        code, out, err = invoke_streams(["validate", tmp_path / "missing.yaml"])
        assert code == 2 and err.count("\n") == 1 and "missing.yaml" in err, (stdout, stderr, err)
        code, out, err = invoke_streams(["validate", inp.config])
        assert code == 0 and ": ok (" in out and not err, (stdout, stderr, out, err)


# -- 4. real processes: what only a process shows ---------------------------------------------------
def _specbench(*args, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "SPECBENCH_ENVS_DIR": "/nonexistent"}
    env.pop("SPECBENCH_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "specbench", *map(str, args)], env=env, cwd=ROOT, text=True, timeout=60, **kw
    )


RUN = ROOT / "results" / "baselines" / "cpu-default"
LOG = RUN / "mla-on__output_norm-on__r0" / "server.log"
COMMANDS = [
    ["--help"],
    ["--version"],
    ["compare", "--help"],
    ["validate"],
    ["run", "--dry-run"],
    ["parse", LOG, "--format", "jsonl"],
    ["compare", RUN, RUN, "-q"],
    ["fixtures", "path"],
    ["envs", "list"],
]


@pytest.mark.heavy
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(map(str, a[:2])))
def test_stdout_on_a_full_disk_is_exit_2_with_one_line(argv, tmp_path):
    with open("/dev/full", "w") as full:
        r = _specbench(*argv, stdout=full, stderr=subprocess.PIPE)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "No space left on device writing the output to standard output" in lines[0], r.stderr


@pytest.mark.heavy
def test_eio_on_stdout_is_exit_2_naming_standard_output():
    """A terminal gone: writes to a pty whose other end is closed fail with EIO."""
    master, slave = pty.openpty()
    os.close(master)
    try:
        r = _specbench("compare", RUN, RUN, "-q", stdout=slave, stderr=subprocess.PIPE)
        r2 = _specbench("--help", stdout=slave, stderr=subprocess.PIPE)
    finally:
        os.close(slave)
    for res in (r, r2):
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, res.stderr
        assert "Input/output error writing the output to standard output" in lines[0], res.stderr


@pytest.mark.heavy
@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["report", "--help"]], ids=" ".join)
def test_a_reader_gone_before_help_is_written_is_no_error(argv):
    """Before: exit 1 (typer's sys.exit(1) for EPIPE), the code CI reads as a regression."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "specbench", *argv],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader leaves before a byte is written
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err and "error" not in err, err


@pytest.mark.heavy
def test_stderr_on_a_full_disk_changes_no_exit_code(tmp_path):
    """Before: exit 1 for an input error and for a report that succeeded (its warnings unwritable)."""
    with open("/dev/full", "w") as full:
        missing = _specbench("report", tmp_path / "missing.log", stdout=subprocess.PIPE, stderr=full)
        done = _specbench("report", RUN, "--no-plots", "--out", tmp_path / "r", stdout=subprocess.DEVNULL, stderr=full)
    assert (missing.returncode, done.returncode) == (2, 0) and (tmp_path / "r" / "summary.md").is_file()

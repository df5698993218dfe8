"""Generated hostile inputs (issues 31, 43, 58): 3,600+ cases from family templates x seeded mutations
(hostile_cases.py, and the run-directory cases below), each fed to the CLI in-process (``run_cli``,
the ``specbench`` entry point's code) under a 30 s alarm, and a few real processes for what only a
process shows (a closed stdout, a reader that stops, SIGTERM/SIGHUP while writing).

For every case: no hang (each case under 30 s), exit code as the family says (bad input: 2 with
one line naming the file, field or flag; never the catch-all "unexpected ..."), no traceback, no
secret in stdout, stderr or any file written, no input changed (hashed before and after). Counts
per family and the slowest case are printed (``-s``). A failure names the family, seed index and
case, so it can be replayed.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hostile_cases import (
    MARKUP_NAMES,
    Case,
    Inputs,
    alias_cases,
    credential_names,
    empty_cases,
    markup_cases,
    number_cases,
    overflow_cases,
    oversized_cases,
    path_case,
    path_slots,
    secret_cases,
    secret_spelling_cases,
    special_path_cases,
    strict_cases,
)
from hostile_cases import _base as hostile_base
from test_contract import (  # noqa: F401
    ENV_SECRET,
    ROOT,
    _clean_env,
    _small_run,
    check,
    invoke,
    tree_hash,
)

from specbench.cli.main import run_cli

SEED = 31
BOUND_S = 30.0
# (family, cases): 3,630, in-process; the run-directory families are built below. No "standard streams"
# family: stream_cases draws nothing at random, so its cases are the fast loop's own, every one
# (test_hostile_by_construction.py::test_every_command_with_failing_standard_streams_keeps_the_contract).
N = {
    "special paths": 300,
    "markup and control characters": 300,
    "overflow numbers": 300,
    "secret spellings": 300,
    "aliases": 330,
    "secrets": 560,
    "strict types": 400,
    "empty/NUL": 280,
    "oversized": 60,
    "output paths from the environment": 60,
    "special files in run directories": 250,
    "oversized run files": 70,
    # issue 58: every command and path-bearing argument
    "paths: markup and control characters": 150,
    "paths: credentials": 150,
    "numbers in files": 120,
}


class Hang(Exception):
    pass


@contextlib.contextmanager
def alarm(seconds: float):
    def fire(signum, frame):
        raise Hang(f"no answer within {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _files_in(argv: list) -> list[Path]:
    # devices, /proc files, FIFOs and sockets are no inputs to hash (reading them is the hazard)
    return [
        Path(a)
        for a in argv
        if isinstance(a, Path) and not str(a).startswith(("/dev/", "/proc/")) and (a.is_file() or a.is_dir())
    ]


# -- run-directory families: each case changes the candidate run, runs, then restores it --------------
SPECIAL = ["fifo", "dev-zero", "dev-null", "socket", "directory", "link-to-fifo"]


def _make_special(target: Path, kind: str, scratch: Path) -> None:
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind in ("dev-zero", "dev-null"):
        target.symlink_to(f"/dev/{kind[4:]}")
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        with contextlib.chdir(target.parent):  # a socket's path must fit in 107 bytes
            s.bind(target.name)
        s.close()
    elif kind == "directory":
        target.mkdir()
    else:
        fifo = scratch / f"fifo-{target.name}"
        if not fifo.exists():
            os.mkfifo(fifo)
        target.symlink_to(fifo)


def run_dir_cases(rng: random.Random, tmp: Path, base: Path, cand: Path, gate: Path):
    """(case, change, restore) triples over the candidate run ``cand``."""
    manifest = json.loads((cand / "manifest.json").read_text())
    cells = manifest["cells"]
    pristine = {p: p.read_bytes() for p in cand.rglob("*") if p.is_file()}
    touched: list[Path] = []

    def restore():
        # Only what a case changed: its target (read back no further: a 10 GB sparse file).
        for p in touched:
            if p.is_symlink() or p.is_file() or p.is_socket() or p.is_fifo():
                p.unlink()
            elif p.is_dir():
                shutil.rmtree(p)
            p.write_bytes(pristine[p])
        touched.clear()

    # --allow-inconclusive: copies of one run are too weak for the default gates (exit 3); what is
    # under test is where the summary goes
    compare = ["compare", base, cand, "--resamples", "100", "--allow-inconclusive"]
    out = []
    for i in range(N["output paths from the environment"]):
        inside = rng.random() < 0.85
        target = (
            rng.choice(
                [
                    cand / "manifest.json",
                    cand / cells[0] / "cell.json",
                    cand,
                    cand / "new.md",
                    cand / cells[-1] / "x" / "y.md",
                    base / "summary.md",
                    gate,
                ]
            )
            if inside
            else tmp / f"summary{i}.md"
        )
        argv = [*compare, "--gate-file", gate] if target == gate else list(compare)
        case = Case(
            "output paths from the environment",
            f"GITHUB_STEP_SUMMARY={target}",
            argv,
            {2} if inside else {0},
            ["GITHUB_STEP_SUMMARY"],
            env={"GITHUB_STEP_SUMMARY": str(target)},
            said="input of this command" if inside else "",
        )
        out.append((case, None, None))  # elsewhere: a full compare (a second), so only a few
    for _i in range(N["special files in run directories"]):
        rel = rng.choice(["manifest.json", "C/cell.json", "C/acceptance.json", "C/summary.json", "C/requests.jsonl"])
        target = cand / rel.replace("C", rng.choice(cells))
        kind = rng.choice(SPECIAL)
        command = rng.choice(["compare", "compare-swapped", "report"])
        argv = {
            "compare": compare,
            "compare-swapped": ["compare", cand, base, "--resamples", "100"],
            "report": ["report", cand, "--out", tmp / "rep", "--resamples", "100"],
        }[command]
        names = [str(cand)] if rel == "manifest.json" and command == "report" else [str(target)]
        case = Case(
            "special files in run directories", f"{kind} as {target.relative_to(cand)}, {command}", argv, {2}, names
        )
        out.append((case, lambda t=target, k=kind: (touched.append(t), _make_special(t, k, tmp)), restore))
    for _i in range(N["oversized run files"]):
        rel = rng.choice(["manifest.json", "C/cell.json", "C/acceptance.json", "C/summary.json", "positions"])
        cell = cand / rng.choice(cells[:-1])  # a speculative cell (the last is the baseline)
        if rel == "positions":
            n = rng.choice([257, 1000, 100_000, 1_000_000])
            where = rng.choice(["prometheus", "logs", "k"])
            target = cell / "acceptance.json"

            def change(t=target, n=n, where=where):
                touched.append(t)
                a = json.loads(t.read_text())
                if where == "k":
                    a["num_spec_tokens"] = n
                else:
                    a[where]["counts"]["accepted_per_position"] = [1] * n
                t.write_text(json.dumps(a))

            what = f"acceptance.json with {n} positions ({where})"
        else:
            target = cand / rel.replace("C", cell.name)
            n = rng.choice([33, 100, 10_000])  # MB, sparse: refused by size before a byte is read

            def change(t=target, n=n):
                touched.append(t)
                with open(t, "r+b") as fh:
                    fh.truncate(n * 1024 * 1024)

            what = f"{target.relative_to(cand)} of {n} MB"
        command = rng.choice(["compare", "report"])
        argv = compare if command == "compare" else ["report", cand, "--out", tmp / "rep", "--resamples", "100"]
        out.append((Case("oversized run files", f"{what}, {command}", argv, {2}, [str(target)]), change, restore))
    return out


def _run_case(case: Case, seed_i: int, monkeypatch, inputs: list[Path], written: list[Path]) -> float:
    for k, v in case.env.items():
        monkeypatch.setenv(k, v)
    if case.cwd is not None:
        case.cwd.mkdir(parents=True, exist_ok=True)
    if case.setup is not None:
        case.setup()
    before = _hash(*inputs)
    start = time.monotonic()
    where = f"{case.family} seed={SEED} i={seed_i}: {case.what}"
    try:
        with alarm(BOUND_S), contextlib.chdir(case.cwd or Path.cwd()):
            code, out, err = invoke_streams(case.argv, case.stdout, case.stderr)
    except Hang as exc:
        raise AssertionError(f"[{where}] {exc}") from None
    finally:
        if case.cwd is not None and case.setup is not None:
            shutil.rmtree(case.cwd, ignore_errors=True)  # the inputs it made
    took = time.monotonic() - start
    assert took < BOUND_S, f"[{where}] took {took:.1f} s"
    if case.stderr:  # nothing could be said: only the code and standard output are checked
        err = ""
        assert code in case.allowed and "Traceback" not in out, f"[{where}] exit {code}"
    else:
        check(
            where,
            code,
            out,
            err,
            allowed=case.allowed,
            secrets=[ENV_SECRET, *case.secrets],
            names=case.names,
            files=[f for d in written if d.exists() for f in (d.rglob("*") if d.is_dir() else [d]) if f.is_file()],
        )
    if code == 2 and case.said:
        assert case.said in err, f"[{where}] {err}"
    if case.family.startswith(("paths", "markup")):  # a name's control characters are shown, never sent
        assert not set("\x1b\x9b\r\x00") & set(out + err), f"[{where}] {out[-300:]!r} {err!r}"
    if case.stdout == "EPIPE" and 2 not in case.allowed:  # the reader went away: no error of its own
        assert "error:" not in err, f"[{where}] {err}"
    assert _hash(*inputs) == before, f"[{where}] an input changed"
    return took


def _fail(failure: str) -> OSError:
    failure = failure.removesuffix(" on flush")
    if failure == "EPIPE":
        return BrokenPipeError(errno.EPIPE, "Broken pipe")
    return OSError(getattr(errno, failure), os.strerror(getattr(errno, failure)))


class _FailingBytes(io.BytesIO):
    def __init__(self, failure: str) -> None:
        super().__init__()
        self.failure = failure

    def write(self, data) -> int:
        raise _fail(self.failure)


class FailingStream(io.StringIO):
    """A standard stream every write to which fails as ``failure`` says: ENOSPC (``> /dev/full``),
    EIO (a terminal gone) or EPIPE (``| head`` after the reader left); its bytes (``--json -``)
    too. "ENOSPC on flush": writes are kept and the flush fails, as a file on a full disk does
    (what is left for Python's flush at exit ended in status 120). Its file descriptor is one of
    /dev/null: what rich or the CLI point there after a broken pipe (os.dup2) lands nowhere."""

    def __init__(self, failure: str) -> None:
        super().__init__()
        self.failure = failure
        self.buffer = _FailingBytes(failure)
        self.fd = os.open(os.devnull, os.O_WRONLY)

    def write(self, text: str) -> int:
        if self.failure.endswith(" on flush"):
            return super().write(text)
        raise _fail(self.failure)

    def flush(self) -> None:
        if self.failure.endswith(" on flush") and self.getvalue():
            raise _fail(self.failure)

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        os.close(self.fd)
        super().close()


def invoke_streams(argv: list, stdout: str = "", stderr: str = "") -> tuple[int, str, str]:
    """test_contract.invoke, with standard output or error failing on every write when asked."""
    if not stdout and not stderr:
        return invoke(argv)
    # a working stdout has bytes below it (``--json -`` writes there), as a process's has
    out = FailingStream(stdout) if stdout else io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = FailingStream(stderr) if stderr else io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run_cli([str(a) for a in argv])
        text = "" if stdout else out.buffer.getvalue().decode("utf-8", "replace")  # type: ignore[union-attr]
        return code, text, "" if stderr else err.getvalue()
    finally:
        out.close()
        err.close()


def make_inputs(tmp: Path) -> Inputs:
    """The real inputs the issue-58 families copy to their hostile paths."""
    tmp.mkdir(parents=True, exist_ok=True)
    run = _small_run(tmp / "run")
    cell = run / json.loads((run / "manifest.json").read_text())["cells"][0]
    config = tmp / "study.yaml"
    config.write_text(yaml.safe_dump(hostile_base(tmp / "res"), sort_keys=False))
    jsonl = tmp / "records.jsonl"
    code, out, _ = invoke(["parse", cell / "server.log", "--format", "jsonl"])
    assert code == 0 and out.strip()
    jsonl.write_text(out)
    (tmp / "gates.yaml").write_text("gates: [acceptance_length:-3%]\n")
    (tmp / "noise.yaml").write_text("e2e_p50_ms: +80%\n")
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"say {i}"}) + "\n" for i in range(4)))
    return Inputs(
        run=run,
        log=cell / "server.log",
        config=config,
        gate=tmp / "gates.yaml",
        noise=tmp / "noise.yaml",
        jsonl=jsonl,
        prom=cell / "metrics_after.prom",
        bench=ROOT / "tests" / "metrics" / "data" / "vllm_bench" / "detailed.json",
        prompts=prompts,
    )


def issue58_cases(rng: random.Random, inp: Inputs, scratch: Path, counts: dict[str, int]) -> list[Case]:
    """The four hostile classes of issue 58 at every command and path-bearing argument: ``counts``
    cases of each path and numbers family (seeded picks; the numbers family cycles through every
    slot). The standard streams family is not here: it is the same in every run, so the fast loop runs it."""
    slots = path_slots(inp, scratch / "o")
    out = []
    for i in range(counts["paths: markup and control characters"]):
        name = rng.choice(MARKUP_NAMES)
        out.append(
            path_case(
                "paths: markup and control characters",
                rng.choice(slots),
                name,
                rng.random() < 0.5,
                [],
                inp,
                scratch / f"m{i}",
            )
        )
    for i in range(counts["paths: credentials"]):
        name, secret = rng.choice(credential_names(rng))
        out.append(
            path_case(
                "paths: credentials", rng.choice(slots), name, rng.random() < 0.5, [secret], inp, scratch / f"k{i}"
            )
        )
    out += number_cases(rng, inp, scratch / "num", counts["numbers in files"])
    return out


@pytest.mark.slow  # a whole-CLI sweep over 3,630 generated inputs
def test_3000_generated_hostile_inputs_keep_the_contract(tmp_path, monkeypatch):
    rng = random.Random(SEED)
    scratch = tmp_path / "s"
    scratch.mkdir()
    base, cand = _small_run(tmp_path / "base"), _small_run(tmp_path / "cand")
    gate = tmp_path / "gates.yaml"
    gate.write_text("gates: [acceptance_length:-3%]\n")
    gate_argv = ["compare", base, cand, "--resamples", "100"]
    cases = [
        (c, None, None)
        for c in (
            alias_cases(rng, scratch, N["aliases"], gate_argv)
            + secret_cases(rng, scratch, N["secrets"])
            + strict_cases(rng, scratch, N["strict types"])
            + empty_cases(rng, scratch, N["empty/NUL"], base)
            + oversized_cases(rng, scratch, N["oversized"], gate_argv)
        )
    ]
    cases += [(c, None, None) for c in _issue43_cases(rng, tmp_path, scratch, base)]
    cases += [(c, None, None) for c in issue58_cases(rng, make_inputs(tmp_path / "in58"), scratch / "58", N)]
    cases += run_dir_cases(rng, tmp_path, base, cand, gate)
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    failures: list[str] = []
    pristine = _relative(cand)
    slowest, start = (0.0, ""), time.monotonic()
    for i, (case, change, restore) in enumerate(cases):
        if change:
            change()
        inputs = _files_in(case.argv) + [base]
        took = 0.0
        try:
            took = _run_case(case, i, monkeypatch, inputs, [scratch / "res", tmp_path / "rep"])
        except AssertionError as exc:  # all failures are listed, not only the first
            failures.append(str(exc).splitlines()[0] + " | " + " ".join(str(exc).splitlines()[1:3])[:300])
        finally:
            for k in case.env:
                monkeypatch.delenv(k, raising=False)
            if restore:
                restore()
        counts[case.family] = counts.get(case.family, 0) + 1
        seconds[case.family] = seconds.get(case.family, 0.0) + took
        slowest = max(slowest, (took, f"{case.family}: {case.what}"))
    total = sum(counts.values())
    print(
        f"\n{total} generated hostile inputs in {time.monotonic() - start:.1f} s (seed {SEED}); slowest "
        f"{slowest[0]:.2f} s ({slowest[1]})"
    )
    for family, n in counts.items():
        print(f"  {family}: {n} cases, {seconds[family]:.1f} s")
    if failures:
        (Path(os.environ.get("SPECBENCH_HOSTILE_FAILURES", tmp_path / "failures.txt"))).write_text("\n".join(failures))
    assert not failures, f"{len(failures)} of {total} cases broke the contract:\n" + "\n".join(failures[:30])
    assert total >= 3000 and set(counts) == set(N)
    assert _relative(cand) == pristine  # every change was undone: each case met the run it was meant for


def _issue43_cases(rng: random.Random, tmp: Path, scratch: Path, run: Path) -> list[Case]:
    """The families issue 43 added: special paths, markup and control characters, overflow numbers,
    secret spellings (hostile_cases.py), with the FIFO, socket, log and records they start from."""
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    sock = tmp / "sock"
    s = socket.socket(socket.AF_UNIX)
    with contextlib.chdir(tmp):
        s.bind(sock.name)
    s.close()
    log = tmp / "server.log"
    log.write_text((run / json.loads((run / "manifest.json").read_text())["cells"][0] / "server.log").read_text())
    code, out, _ = invoke(["parse", log, "--format", "jsonl"])
    assert code == 0 and out.strip(), "the small run's log parses"
    bench = json.loads((ROOT / "tests" / "metrics" / "data" / "vllm_bench" / "detailed.json").read_text())
    return (
        special_path_cases(rng, scratch, N["special paths"], run, fifo, sock)
        + markup_cases(rng, scratch, N["markup and control characters"], run, log)
        + overflow_cases(rng, scratch, N["overflow numbers"], out.splitlines()[0], bench)
        + secret_spelling_cases(rng, scratch, N["secret spellings"])
    )


def _relative(run: Path) -> dict[str, str]:
    return {k[len(str(run)) :]: v for k, v in _hash(run).items()}


def _hash(*roots: Path) -> dict[str, str]:
    """tree_hash, but a file over 64 MB (a sparse one made here) by its size and mtime: reading
    10 GB of zeros twice per case is not the test."""
    big = {
        str(p): f"size:{p.stat().st_size}:{p.stat().st_mtime_ns}"
        for r in roots
        if r.is_dir()
        for p in r.rglob("*")
        if p.is_file() and not p.is_symlink() and p.stat().st_size > 64 << 20
    }
    if not big:
        return tree_hash(*roots)
    out = {}
    for r in roots:
        for p in [r] if not r.is_dir() else sorted(r.rglob("*")):
            if str(p) in big:
                out[str(p)] = big[str(p)]
            elif p.is_dir() and not p.is_symlink():  # its files come on their own in rglob
                out[str(p)] = "dir"
            else:
                out[str(p)] = next(iter(tree_hash(p).values()), "?")
    return out


# -- real processes: what in-process calls cannot show -----------------------------------------------
def _spawn(argv: list, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "HF_TOKEN": ENV_SECRET}
    env.pop("SPECBENCH_DEBUG", None)
    return subprocess.Popen(
        [sys.executable, "-m", "specbench", *map(str, argv)], env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True, **kw
    )


@pytest.mark.heavy
def test_closed_pipes_and_signals_during_writes_in_real_processes(tmp_path):
    """Seeded picks from the process families (the fixed reproducers are in test_hostile_inputs.py
    and test_signals.py): a closed stdout, a reader that stops after a random number of bytes, and
    SIGTERM or SIGHUP while report writes its directory, each within 30 s, no traceback."""
    from test_signals import _written_then

    rng = random.Random(SEED)
    run = _small_run(tmp_path / "run")
    before = tree_hash(run)
    log = tmp_path / "big.log"
    log.write_text((run / json.loads((run / "manifest.json").read_text())["cells"][0] / "server.log").read_text() * 200)
    # closed stdout (`>&-`): a usage error, one line
    argv = rng.choice(
        [
            ["parse", log, "--format", "csv"],
            ["parse", log, "--format", "jsonl"],
            ["compare", run, run, "--resamples", "100"],
            ["validate", ROOT / "configs" / "default.yaml"],
        ]
    )
    proc = _spawn(argv, preexec_fn=lambda: os.close(1))
    err = proc.communicate(timeout=BOUND_S)[1]
    assert proc.returncode == 2 and err.count("\n") == 1 and "standard output is closed" in err, (argv, err)
    # a reader that stops early (`| head -c N`): no error, exit 0
    fmt, n = rng.choice(["table", "jsonl", "csv"]), rng.choice([1, 100, 5000, 70_000])
    proc = _spawn(["parse", log, "--format", fmt], stdout=subprocess.PIPE)
    proc.stdout.read(n)
    proc.stdout.close()
    err = proc.communicate(timeout=BOUND_S)[1]
    assert proc.returncode == 0 and "Traceback" not in err and "error" not in err, (fmt, n, err)
    # SIGTERM or SIGHUP while report writes: exit 130, no temp file, the partial set marked
    sig = rng.choice([signal.SIGTERM, signal.SIGHUP])
    out = tmp_path / "rep"
    start = time.monotonic()
    code = _written_then(sig, ["report", str(run), "--out", str(out), "--resamples", "100"], out)
    assert time.monotonic() - start < BOUND_S
    names = [p.name for p in out.iterdir()]
    assert code == 130 and "INCOMPLETE" in names and not [x for x in names if x.endswith(".tmp")], (sig, names)
    assert tree_hash(run) == before

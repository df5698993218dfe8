"""Generated hostile inputs for test_hostile_generated.py (issue 31): family templates crossed with
seeded mutations. Pure functions of a ``random.Random`` and a scratch folder; each case says what
it is (family, seed index, description), how to run it (argv, environment) and what must come out
(allowed exit codes, what the one error line names, which secrets must appear nowhere).

Families: recursive and amplifying aliases; secrets at every entry point (config env, extra_args in
each spelling, ``--set``, URLs with a password, ``flag:`` axes); strict types; empty and NUL values;
oversized inputs. Output paths from the environment and special files inside run directories need
a run directory, so the test builds those cases itself (``run_dir_cases``).
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MODEL = str(Path(__file__).resolve().parent)  # any existing directory is a valid local model path


@dataclass
class Case:
    family: str
    what: str
    argv: list[Any]
    allowed: set[int]
    names: list[str] = field(default_factory=list)  # on exit 2 the error line names one of these
    secrets: list[str] = field(default_factory=list)
    said: str = ""  # a phrase the error line must hold
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None  # the working directory the case runs in (its paths are relative to it)
    setup: Any = None  # makes the case's inputs before it runs (its cwd is removed after)
    stdout: str = ""  # "ENOSPC", "EIO" or "EPIPE": standard output fails so on every write
    stderr: str = ""  # likewise standard error


def _base(results_dir: Path) -> dict[str, Any]:
    return {
        "name": "hostile",
        "serve": {"model": MODEL, "per_request_metrics": "off"},
        "load": {"num_requests": 4},
        "results_dir": str(results_dir),
    }


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _command(rng: random.Random, p: Path) -> list[Any]:
    return ["validate", p] if rng.random() < 0.6 else ["run", "--dry-run", p]


# -- recursive and amplifying aliases ------------------------------------------------------------
RECURSIVE = [
    "&a [*a]",
    "&a {b: *a}",
    "&a [x, [y, *a]]",
    "&a {b: [1, {c: *a}]}",
    "&a [&b [*a, *b]]",
    "&a [[[[[*a]]]]]",
    "&a {k: &b {j: *a}}",
]
PLACES = [
    ("top", None),
    ("serve.env", ("serve", "env")),
    ("load.num_requests", ("load", "num_requests")),
    ("matrix", ("matrix",)),
    ("serve.extra_args", ("serve", "extra_args")),
]


def alias_cases(rng: random.Random, d: Path, n: int, gate_argv: list[Any]) -> list[Case]:
    out = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.55:  # recursive, in a config file (at one place) or a --set value
            node = rng.choice(RECURSIVE)
            where, path = rng.choice(PLACES)
            if rng.random() < 0.7:
                body = yaml.safe_dump(_base(d / "res"), sort_keys=False)
                key = "x_" + where.replace(".", "_")
                text = f"{key}: {node}\n" + body if path is None else body + f"{key}: {node}\n"
                p = _write(d / f"alias{i}.yaml", text)
                out.append(
                    Case(
                        "aliases",
                        f"recursive {node!r} in a config",
                        _command(rng, p),
                        {2},
                        [str(p)],
                        said="recursive alias",
                    )
                )
            else:
                p = _write(d / f"alias{i}.yaml", yaml.safe_dump(_base(d / "res")))
                key = ".".join(path or ("serve", "env", "X"))
                out.append(
                    Case(
                        "aliases",
                        f"recursive {node!r} in --set {key}",
                        [*_command(rng, p), "--set", f"{key}={node}"],
                        {2},
                        [key],
                        said="recursive alias",
                    )
                )
        elif kind < 0.75:  # recursive in a gate file
            node = rng.choice(RECURSIVE)
            g = _write(d / f"gate{i}.yaml", f"x: {node}\ngates: {rng.choice(['*a', '[acceptance_length:-3%]'])}\n")
            out.append(
                Case("aliases", f"recursive {node!r} in a gate file", [*gate_argv, "--gate-file", g], {2}, [str(g)])
            )
        else:  # amplifying: one long string aliased many times, or a doubling chain
            if rng.random() < 0.6:
                size, times = rng.choice([20_000, 50_000, 100_000]), rng.choice([50, 200, 1000])
                text = f"s: &s '{'y' * size}'\nl: [" + ", ".join(["*s"] * times) + "]\n"
                what = f"{size}-char string aliased {times} times"
            else:
                levels, fan = rng.randint(6, 9), rng.randint(9, 12)
                text = "l0: &l0 [x]\n" + "".join(
                    f"l{j}: &l{j} [{', '.join([f'*l{j - 1}'] * fan)}]\n" for j in range(1, levels)
                )
                what = f"{levels} levels of {fan} aliases"
            p = _write(d / f"amp{i}.yaml", text + yaml.safe_dump(_base(d / "res")))
            out.append(Case("aliases", what, _command(rng, p), {2}, [str(p)]))
    return out


# -- secrets -------------------------------------------------------------------------------------
def _secret(rng: random.Random) -> str:
    body = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(16, 32)))
    return rng.choice(["hf_", "sk-", "ghp_", "xoxb-", "tok"]) + body


def _password(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "-_.~!$") for _ in range(rng.randint(10, 20)))


def secret_cases(rng: random.Random, d: Path, n: int) -> list[Case]:
    out = []
    for i in range(n):
        s, pw = _secret(rng), "Pw" + _password(rng)
        url = f"{rng.choice(['http', 'https', 'grpc'])}://{rng.choice(['u', 'admin', 'x.y'])}:{pw}@collector:4317"
        cfg, sets, shown = _base(d / f"res{i}"), [], [s]
        form = rng.randrange(12)
        if form == 0:
            cfg["serve"]["env"] = {
                rng.choice(["HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "MY_PASSWORD"]): s
            }
        elif form == 1:
            cfg["serve"]["extra_args"] = rng.choice(
                [
                    ["--api-key", s],
                    ["--api-key", "-" + s],
                    ["--api-key", "--" + s],
                    ["-api-key", s],
                    [f"--api-key={s}"],
                    ["--hf-token", s],
                    ["--api-k", s],
                    ["--api-key", "k0" + s, s],
                ]
            )
        elif form == 2:
            cfg["serve"]["extra_args"] = ["--otlp-traces-endpoint", url]
            shown = [pw]
        elif form == 3:
            cfg["matrix"] = {"flag:--collect-detailed-traces": [url]}
            shown = [pw]
        elif form == 4:
            cfg["matrix"] = {rng.choice(["env:OPENAI_API_KEY", "env:HF_TOKEN", "flag:--api-key"]): [s, s + "2"]}
        elif form == 5:
            cfg["serve"]["env"] = {"DATABASE_URL": f"postgres://db:{pw}@h/db", "PROXY": url}
            shown = [pw]
        elif form == 6:
            sets = [f"serve.env.{rng.choice(['HF_TOKEN', 'OPENAI_API_KEY'])}={s}"]
        elif form == 7:
            sets = [f"serve.extra_args=[{rng.choice(['--api-key', '-api-key', '--hf-token'])}, {s}]"]
        elif form == 8:
            sets = [f"serve.env.HF_TOKEN=[{s}"]  # not YAML: must not be echoed
        elif form == 9:
            sets = [f"serve.model=https://u:{pw}@h/m"]
            shown = [pw]
        elif form == 10:
            sets = [f"serve.extra_args=[--otlp-traces-endpoint, '{url}']"]
            shown = [pw]
        else:
            cfg["serve"]["model"] = f"https://u:{pw}@h/m"
            shown = [pw]
        # half the time a second, unrelated error, so error paths that echo the config run too
        broken = rng.random() < 0.5
        if broken:
            sets.append(rng.choice(["serve.port=x", "load.num_requests=-1", "serve.nope=1"]))
        p = _write(d / f"secret{i}.yaml", yaml.safe_dump(cfg, sort_keys=False))
        refused = broken or form in (8, 9, 11)  # not YAML; a URL is no model
        out.append(
            Case(
                "secrets",
                f"form {form}, {'with' if broken else 'no'} other error, sets {len(sets)}",
                [*_command(rng, p), *[x for v in sets for x in ("--set", v)]],
                {2} if refused else {0},
                secrets=shown,
            )
        )
    return out


# -- strict types --------------------------------------------------------------------------------
INT_FIELDS = [
    ("serve", "port"),
    ("serve", "tensor_parallel_size"),
    ("serve", "max_model_len"),
    ("serve", "max_num_seqs"),
    ("load", "num_requests"),
    ("load", "concurrency"),
    ("load", "max_tokens"),
    ("load", "seed"),
    ("serve", "speculative", "num_speculative_tokens"),
]
BOOL_FIELDS = [("serve", "enforce_eager"), ("serve", "trust_remote_code")]
FLOAT_FIELDS = [("load", "temperature"), ("serve", "startup_timeout_s")]
WRONG = {
    "int": [True, False, "80", "3", 4.5, [1], {"a": 1}, "0x10", "1e3"],
    "bool": ["yes", "true", "on", 1, 0, "1", [True]],
    "float": ["0.5", True, [0.1], {"a": 1.0}, "inf"],
}
RIGHT = {
    ("serve", "port"): 8000,
    ("serve", "tensor_parallel_size"): 1,
    ("serve", "max_model_len"): 512,
    ("serve", "max_num_seqs"): 4,
    ("load", "num_requests"): 8,
    ("load", "concurrency"): 2,
    ("load", "max_tokens"): 16,
    ("load", "seed"): 0,
    ("serve", "speculative", "num_speculative_tokens"): 3,
    ("serve", "enforce_eager"): True,
    ("serve", "trust_remote_code"): False,
    ("load", "temperature"): 0.5,
    ("serve", "startup_timeout_s"): 30,
}


def _set_in(cfg: dict, path: tuple, value: Any) -> None:
    node = cfg
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value


def strict_cases(rng: random.Random, d: Path, n: int) -> list[Case]:
    out = []
    fields = (
        [(f, "int") for f in INT_FIELDS] + [(f, "bool") for f in BOOL_FIELDS] + [(f, "float") for f in FLOAT_FIELDS]
    )
    for i in range(n):
        path, kind = rng.choice(fields)
        right = rng.random() < 0.12  # controls: right types still pass
        value = RIGHT[path] if right else rng.choice(WRONG[kind])
        cfg = _base(d / "res")
        if path[1] == "speculative":
            cfg["serve"]["speculative"] = {"draft": MODEL}
        dotted = ".".join(path)
        if rng.random() < 0.6:
            _set_in(cfg, path, value)
            p = _write(d / f"strict{i}.yaml", yaml.safe_dump(cfg, sort_keys=False))
            argv = _command(rng, p)
        else:
            p = _write(d / f"strict{i}.yaml", yaml.safe_dump(cfg, sort_keys=False))
            argv = [*_command(rng, p), "--set", f"{dotted}={yaml.safe_dump(value, default_flow_style=True).strip()}"]
            argv[-1] = argv[-1].removesuffix("\n...")
        out.append(Case("strict types", f"{dotted}: {value!r}", argv, {0} if right else {2}, [dotted]))
    return out


# -- empty and NUL values ------------------------------------------------------------------------
EMPTY_FIELDS = {
    ("serve", "model"): {2},
    ("serve", "speculative", "draft"): {2},
    ("results_dir",): {2},
    ("name",): {2},
    ("serve", "host"): {2},
    ("serve", "env", "X"): {0, 2},
    ("load", "prompts", "file"): {2},
}


def empty_cases(rng: random.Random, d: Path, n: int, run: Path) -> list[Case]:
    out = []
    cli = [
        (["report", "--out", ""], "--out"),
        (["run", "--dry-run", "--out", ""], "--out"),
        (["report", run, "--out", d / "rep", "--seed", "-1"], "--seed"),
        (["compare", run, run, "--seed", "-1"], "--seed"),
        (["compare", run, run, "--json", ""], "--json"),
        (["compare", run, run, "--markdown", ""], "--markdown"),
        (["parse", ""], ""),
        (["validate", ""], ""),
        (["compare", "", run], ""),
        (["report", "", "--out", d / "r"], ""),
        (["parse", "a\0b"], ""),
        (["validate", "a\0b"], ""),
        (["report", "a\0b", "--out", d / "r"], ""),
        (["compare", run, run, "--json", "a\0b"], "--json"),
    ]
    for i in range(n):
        if rng.random() < 0.25:
            argv, flag = rng.choice(cli)
            out.append(Case("empty/NUL", f"argv {argv[1:]!r}", list(argv), {2}, [flag] if flag else []))
            continue
        path, allowed = rng.choice(list(EMPTY_FIELDS.items()))
        value = rng.choice(["", " ", "\0", "a\0b", "\t", "x\0" * 3])
        nul = "\0" in value
        cfg = _base(d / "res")
        if path[1:2] == ("speculative",):
            cfg["serve"]["speculative"] = {"draft": MODEL}
        _set_in(cfg, path, value)
        p = _write(d / f"empty{i}.yaml", yaml.safe_dump(cfg, sort_keys=False))
        dotted = ".".join(path)
        out.append(
            Case("empty/NUL", f"{dotted}: {value!r}", _command(rng, p), {2} if nul else allowed, [dotted, str(p)])
        )
    return out


# -- oversized inputs ----------------------------------------------------------------------------
def oversized_cases(rng: random.Random, d: Path, n: int, gate_argv: list[Any]) -> list[Case]:
    out = []
    for i in range(n):
        size = rng.choice([260_000, 400_000, 1_000_000, 3_000_000])
        shape = rng.choice(["list", "string", "keys", "comment"])
        filler = {
            "list": "x: [" + "1, " * (size // 3) + "]\n",
            "string": "x: '" + "y" * size + "'\n",
            "keys": "".join(f"k{j}: {j}\n" for j in range(size // 8)),
            "comment": "#" + "c" * size + "\n",
        }[shape]
        where = rng.choice(["config", "config", "gate", "set"])
        if where == "config":
            p = _write(d / f"big{i}.yaml", yaml.safe_dump(_base(d / "res")) + filler)
            out.append(
                Case("oversized", f"{size}-char {shape} in a config", _command(rng, p), {2}, [str(p)], said="more than")
            )
        elif where == "gate":
            g = _write(d / f"big{i}.yaml", "gates: [acceptance_length:-3%]\n" + filler)
            out.append(
                Case("oversized", f"{size}-char {shape} in a gate file", [*gate_argv, "--gate-file", g], {2}, [str(g)])
            )
        else:
            p = _write(d / f"big{i}.yaml", yaml.safe_dump(_base(d / "res")))
            value = "[" + "1, " * (size // 3) + "]" if shape == "list" else "y" * size
            out.append(
                Case(
                    "oversized",
                    f"{size}-char --set value",
                    [*_command(rng, p), "--set", f"serve.env.X={value}"],
                    {2},
                    ["serve.env.X"],
                )
            )
    return out


# -- special paths as arguments and outputs (issue 43) ------------------------------------------------
SPECIAL_PATHS = ["fifo", "/dev/zero", "/dev/urandom", "/dev/full", "/dev/null", "socket", "/proc/self/mem"]


def special_path_cases(rng: random.Random, d: Path, n: int, run: Path, fifo: Path, sock: Path) -> list[Case]:
    """A FIFO, a device, a socket or /proc/self/mem where a command reads or writes a file: exit 2
    naming it, never a hang or an unbounded read. ``fifo`` and ``sock`` exist (the test makes them)."""
    out = []
    for _ in range(n):
        kind = rng.choice(SPECIAL_PATHS)
        path = {"fifo": fifo, "socket": sock}.get(kind, Path(kind))
        slots = [
            (["parse", path], str(path)),
            (["validate", path], str(path)),
            (["run", "--dry-run", path], str(path)),
            (["report", path, "--out", d / "rep"], str(path)),
            (["compare", run, path, "--resamples", "100"], str(path)),
            (["compare", path, run, "--resamples", "100"], str(path)),
            (["compare", run, run, "--gate-file", path, "--resamples", "100"], str(path)),
            (["compare", run, run, "--noise-floor", path, "--resamples", "100"], str(path)),
        ]
        if kind not in ("/proc/self/mem", "/dev/null"):  # outputs: a FIFO or device is refused before any
            # work; /dev/null is the documented way to discard one (io.STREAM_OUTPUTS)
            slots += [
                (["compare", run, run, "--json", path, "--resamples", "100"], "--json"),
                (["compare", run, run, "--markdown", path, "--resamples", "100"], "--markdown"),
                (["compare", run, run, "--junit", path, "--resamples", "100"], "--junit"),
                (["report", run, "--out", path, "--resamples", "100"], "--out"),
            ]
        argv, named = rng.choice(slots)
        out.append(Case("special paths", f"{kind} in {argv[0]} {argv[1:]!r}"[:160], argv, {2}, [named]))
    return out


# -- markup and control characters in every user string (issue 43) --------------------------------------
MARKUP = [
    "[/]",
    "[bold]x",
    "x[/bold]",
    "a|b",
    "a\nb",
    "\x1b[31mred",
    "v\x0bt",
    "\x01",
    "[link=file:///etc]x[/link]",
    "$x^2$",
]


def markup_cases(rng: random.Random, d: Path, n: int, run: Path, log: Path) -> list[Case]:
    """User text holding rich markup, Markdown table syntax, control characters or mathtext, in a
    label, an output path, an axis value, a config name, a path that does not exist: it is text
    (exit 0 or a one-line exit 2), never a masked crash ("unexpected MarkupError")."""
    out = []
    # A report renders its figures the first time a value reaches it in a slot; a repeat of the same
    # value there (~5 of each) draws the same text again, so it skips the figures (~5 s each here).
    drawn: set[tuple[int, str]] = set()
    for i in range(n):
        v = rng.choice(MARKUP)
        where = rng.randrange(6)
        figures = [] if (where, v) not in drawn else ["--no-plots"]
        drawn.add((where, v))
        if where == 0:
            argv, allowed = (
                ["report", log, "--label", f"L{v}={log}", "--out", d / f"lab{i}", "--resamples", "100", *figures],
                {0, 2},
            )
        elif where == 1:
            argv, allowed = ["report", log, "--out", d / f"o{i}{v}", "--resamples", "100", *figures], {0, 2}
        elif where == 2:
            cfg = _base(d / "res")
            cfg["matrix"] = {"env:FOO": [v, "b"]}
            argv, allowed = _command(rng, _write(d / f"axis{i}.yaml", yaml.safe_dump(cfg))), {0, 2}
        elif where == 3:
            cfg = _base(d / "res")
            cfg["name"] = f"n{v}"
            argv, allowed = _command(rng, _write(d / f"name{i}.yaml", yaml.safe_dump(cfg))), {0, 2}
        elif where == 4:
            argv, allowed = [rng.choice(["parse", "validate"]), d / f"missing{v}.log"], {2}
        else:
            argv, allowed = ["compare", run, run, "--resamples", "100", "--json", d / f"j{i}{v}.json"], {0, 2, 3}
        out.append(Case("markup and control characters", f"{v!r} at {where}", argv, allowed))
    return out


# -- overflow numbers (issue 43) ------------------------------------------------------------------------
OVERFLOW = ["1e400", "-1e400", "1" + "0" * 30, "NaN", "Infinity", "-1", "1e-400"]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def overflow_cases(rng: random.Random, d: Path, n: int, jsonl_line: str, bench: dict) -> list[Case]:
    """Numbers no run writes (overflowing, non-finite, negative counts) in a parse JSONL record or a
    ``vllm bench`` result file: exit 2 naming the file (a tiny positive float is a number: exit 0)."""
    record = json.loads(jsonl_line)
    counts = [k for k, v in record.items() if _number(v) and ("draft" in k or "accept" in k)]
    out = []
    for i in range(n):
        value = rng.choice(OVERFLOW)
        if rng.random() < 0.6:
            key = rng.choice(counts)
            text = json.dumps(record).replace(f'"{key}": {json.dumps(record[key])}', f'"{key}": {value}', 1)
            p = _write(d / f"over{i}.jsonl", text + "\n")
            what = f"{key}={value} in parse JSONL"
        else:
            keys = [k for k, v in bench.items() if _number(v) and k.startswith("spec_decode_")]
            key = rng.choice(keys)
            text = json.dumps(bench).replace(f'"{key}": {json.dumps(bench[key])}', f'"{key}": {value}', 1)
            p = _write(d / f"bench{i}.json", text)
            what = f"{key}={value} in a vllm bench result"
        allowed = {0, 2} if value in ("1e-400", "-1") else {2}
        out.append(Case("overflow numbers", what, ["parse", p], allowed, [str(p)]))
    return out


# -- secret spellings (issue 43) ------------------------------------------------------------------------
def secret_spelling_cases(rng: random.Random, d: Path, n: int) -> list[Case]:
    """Secrets spelt as vLLM would still read them (``_`` for ``-``, abbreviations), in OTLP auth
    headers, in a JSON-valued flag, under names no list knows but with values shaped like a
    credential, in URL query parameters: never printed (dry-run argv, errors) nor written."""
    out = []
    for i in range(n):
        s = _secret(rng)
        key = "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))
        cfg = _base(d / f"sres{i}")
        form = rng.randrange(8)
        shown = [s]
        if form == 0:
            cfg["serve"]["extra_args"] = [rng.choice(["--api_key", "--api_k", "--api-ke", "--api_ke"]), s]
        elif form == 1:
            cfg["serve"]["extra_args"] = [rng.choice(["--hf_token", "--hf_t", "--hf-tok"]), s]
        elif form == 2:
            name = rng.choice(["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"])
            cfg["serve"]["env"] = {name: f"Authorization=Bearer {s}"}
        elif form == 3:
            cfg["serve"]["extra_args"] = [
                "--kv-transfer-config",
                '{"kv_connector": "x", "aws_secret_access_key": "%s"}' % s,
            ]
        elif form == 4:
            cfg["serve"]["env"] = {"GH_PAT": s}
        elif form == 5:
            cfg["serve"]["env"] = {"MY_VAR": "sk-" + s}
            shown = ["sk-" + s]
        elif form == 6:
            cfg["serve"]["env"] = {"AWS_KEY_ID_FOR_X": key}
            shown = [key]
        else:
            cfg["serve"]["extra_args"] = ["--otlp-traces-endpoint", f"https://collector:4317/v1?api_key={s}&x=1"]
        broken = rng.random() < 0.4
        sets = [rng.choice(["serve.port=x", "load.num_requests=-1", "serve.nope=1"])] if broken else []
        p = _write(d / f"spell{i}.yaml", yaml.safe_dump(cfg, sort_keys=False))
        out.append(
            Case(
                "secret spellings",
                f"form {form}, {'with' if broken else 'no'} other error",
                [*_command(rng, p), *[x for v in sets for x in ("--set", v)]],
                {2} if broken else {0, 2},
                secrets=shown,
            )
        )
    return out


# -- by construction (issue 58): every command, every path-bearing argument -----------------------------
# Four classes, each made safe in one place: user strings shown through render.format.shown_text /
# user_text / user_line (markup escaped, control characters visible, credentials hidden); numbers in
# JSON / JSON Lines through safe_yaml.loads_json (non-finite or out of range: exit 2 naming
# file:line:field); standard output that cannot be written (exit 2, one line naming it; a reader gone:
# quiet, the command's own code). Paths here are relative: a URL given as a path is the URL as typed,
# and the file it names exists under the case's working directory (pathlib folds its "//").
@dataclass
class Inputs:
    """Real inputs a slot's file is copied from (test_hostile_generated makes them)."""

    run: Path  # a small run directory
    log: Path  # a server.log with spec-decode records
    config: Path  # a valid study config
    gate: Path  # a gate file
    noise: Path  # a noise-floor file
    jsonl: Path  # `specbench parse --format jsonl` records
    prom: Path  # a /metrics scrape
    bench: Path  # a `vllm bench serve` result
    prompts: Path  # a prompt file (JSON Lines)


REP = ["--no-plots", "--resamples", "100"]
CMP = ["--resamples", "100", "--allow-inconclusive"]


def path_slots(inp: Inputs, out: Path) -> list[tuple[str, str, str, Any]]:
    """Every path-bearing argument of every command: (slot, what goes there: an input kind of
    :class:`Inputs`, "out" for an output, "missing" where only a missing path is safe to give,
    the suffix a name gets there, argv for a path there). ``out``: where the other outputs go."""
    r, lg, rep = inp.run, inp.log, str(out / "rep")  # an output as text: the sweep hashes Path arguments as inputs
    return [
        ("run CONFIG", "config", ".yaml", lambda p: ["run", "--dry-run", p]),
        ("run --out", "out", "", lambda p: ["run", "--dry-run", inp.config, "--out", p]),
        ("run --resume", "missing", "", lambda p: ["run", "--resume", p]),  # an existing one would run
        ("validate CONFIG", "config", ".yaml", lambda p: ["validate", p]),
        ("report FILE", "log", ".log", lambda p: ["report", p, "--out", rep, *REP]),
        ("report RUN_DIR", "run", "", lambda p: ["report", p, "--out", rep, *REP]),
        ("report --label", "log", ".log", lambda p: ["report", "--label", f"L={p}", "--out", rep, *REP]),
        ("report --out", "out", "", lambda p: ["report", lg, "--out", p, *REP]),
        ("compare BASELINE", "run", "", lambda p: ["compare", p, r, *CMP]),
        ("compare CANDIDATE", "run", "", lambda p: ["compare", r, p, *CMP]),
        ("compare --gate-file", "gate", ".yaml", lambda p: ["compare", r, r, "--gate-file", p, *CMP]),
        ("compare --noise-floor", "noise", ".yaml", lambda p: ["compare", r, r, "--noise-floor", p, *CMP]),
        ("compare --json", "out", ".json", lambda p: ["compare", r, r, "--json", p, *CMP]),
        ("compare --markdown", "out", ".md", lambda p: ["compare", r, r, "--markdown", p, *CMP]),
        ("compare --junit", "out", ".xml", lambda p: ["compare", r, r, "--junit", p, *CMP]),
        ("compare --html", "out", ".html", lambda p: ["compare", r, r, "--html", p, *CMP]),
        ("compare --plot", "out", ".png", lambda p: ["compare", r, r, "--plot", p, *CMP]),
        ("parse FILES", "log", ".log", lambda p: ["parse", p]),
        ("fixtures path --cache-dir", "out", "", lambda p: ["fixtures", "path", "--cache-dir", p]),
    ]


MARKUP_NAMES = [
    "[bold]x",
    "x[/bold]",
    "[/]",
    "[link=file:///etc]x[/link]",
    "e\x1b[31mred",
    "c\rr",
    "n\nl",
    "c1\x9bx",
    "t\tx",
]


def _word(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def credential_names(rng: random.Random) -> list[tuple[str, str]]:
    """(name, the secret in it): URLs with user info or a bare token, secret query parameters,
    credential-shaped words, each where a path goes."""
    s = "S58" + _word(rng, 17)
    return [
        (f"https://u:{s}@h/x", s),
        (f"https://{s}@h/x", s),
        (f"x?token={s}", s),
        (f"x?api_key={s}&y=1", s),
        (f"hf_{s}", f"hf_{s}"),
        (f"sk-{s}", f"sk-{s}"),
        (f"Bearer {s}", s),
    ]


def place(kind: str, inp: Inputs, path: Path) -> None:
    """Copy the real input of ``kind`` to ``path`` (its parents made)."""
    import shutil

    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "run":
        shutil.copytree(inp.run, path, symlinks=True)
    else:
        shutil.copyfile(getattr(inp, kind), path)


def shown_name(arg: str) -> str:
    """``arg`` as an error line shows it: the path pathlib makes of it ("//" folded), on one line,
    through render.format.shown_text (credentials hidden, control characters visible). Rich expands
    a tab to the next tab stop, which depends on the column the name starts at, so a name with a tab
    is expected by its longest tab-free piece."""
    from specbench.render.format import one_line, shown_text

    shown = shown_text(one_line(str(Path(arg))))
    return max(shown.split("\t"), key=len)


def path_case(family: str, slot: tuple, name: str, present: bool, secrets: list[str], inp: Inputs, cwd: Path) -> Case:
    """One hostile name at one slot, run in ``cwd``: a missing input is exit 2 with one error line
    naming it as given (:func:`shown_name`); a present one (or an output) is read or written as any
    other name is (0, or compare's 3)."""
    label, kind, suffix, argv = slot
    arg = name + suffix
    made = present and kind not in ("out", "missing")
    allowed = {0, 3} if made or kind == "out" else {2}
    state = "output" if kind == "out" else "present" if made else "missing"
    setup = (lambda: place(kind, inp, cwd / arg)) if made else None
    names = [shown_name(arg)] if allowed == {2} else []
    return Case(family, f"{label}: {state} {arg!r}", argv(arg), allowed, names, secrets=secrets, cwd=cwd, setup=setup)


# Numbers no file may hold: non-finite, past any float, or past any count, time or rate.
HOSTILE_NUMBERS = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1" + "0" * 400, "1e300", "-" + "9" * 120]


def _leaves(value: Any, path: str = "") -> list[str]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [path]
    if isinstance(value, dict):  # a key that would read as a path of its own is left alone
        items = [(k, v) for k, v in value.items() if not any(c in str(k) for c in ".[]")]
        return [x for k, v in items for x in _leaves(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [x for i, v in enumerate(value[:4]) for x in _leaves(v, f"{path}[{i}]")]
    return []


def _set_leaf(value: Any, path: str, token: str) -> Any:
    """``value`` with the leaf at ``path`` ("a.b[2].c") replaced by a marker of ``token``."""
    import re

    keys = [k for part in path.split(".") for k in re.findall(r"[^\[\]]+|\[\d+\]", part)]
    node = value
    for k in keys[:-1]:
        node = node[int(k[1:-1])] if k.startswith("[") else node[k]
    last = keys[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = f"@@{token}@@"
    else:
        node[last] = f"@@{token}@@"
    return value


def with_number(text: str, suffix: str, rng: random.Random, token: str) -> tuple[str, str, int]:
    """``text`` (JSON, or JSON Lines: one of its lines) with one numeric field set to ``token``:
    (new text, the field, the line it is on)."""
    if suffix == ".jsonl":
        lines = text.splitlines()
        n = rng.randrange(len(lines))
        row = json.loads(lines[n])
        fld = rng.choice(_leaves(row))
        lines[n] = json.dumps(_set_leaf(row, fld, token)).replace(f'"@@{token}@@"', token)
        return "\n".join(lines) + "\n", fld, n + 1
    data = json.loads(text)
    fld = rng.choice(_leaves(data))
    out = json.dumps(_set_leaf(data, fld, token), indent=2)
    line = out[: out.index(f'"@@{token}@@"')].count("\n") + 1
    return out.replace(f'"@@{token}@@"', token), fld, line


RUN_FILES = ["manifest.json", "C/cell.json", "C/acceptance.json", "C/summary.json", "C/requests.jsonl"]
YAML_NUMBERS = [".inf", "-.inf", ".nan", "1e400", "1" + "0" * 400, "1e300"]


# Every file a command reads numbers from, by the slot that reads it (number_cases' i-th case is at
# slot i mod their number).
NUMBER_SLOTS = ["report RUN_DIR", "compare BASELINE", "compare CANDIDATE", "report JSONL"]
NUMBER_SLOTS += ["parse /metrics", "parse vllm bench", "validate CONFIG", "run CONFIG", "run prompts"]
NUMBER_SLOTS += ["compare --gate-file", "compare --noise-floor"]


def number_cases(rng: random.Random, inp: Inputs, cwd: Path, n: int) -> list[Case]:
    """A number no file may hold in each file a command reads numbers from, the ``i``-th case at
    slot ``i`` mod their number (so ``n`` >= that covers every one): JSON and JSON Lines are exit 2
    naming file:line:field; a /metrics scrape and a ``vllm bench`` result null such a field (a text
    format's policy, metrics/prometheus.py, or vllm bench's own NaN for an empty statistic) or
    refuse it; YAML configs, gate and noise-floor files refuse it or take it as text."""
    cells = json.loads((inp.run / "manifest.json").read_text())["cells"]
    slots = NUMBER_SLOTS
    out = []
    for i in range(n):
        slot, c = slots[i % len(slots)], cwd / f"n{i}"  # the case's own directory (removed after it)
        d = c / "run"
        token = HOSTILE_NUMBERS[(i + i // len(slots)) % len(HOSTILE_NUMBERS)]
        if slot.endswith(("RUN_DIR", "BASELINE", "CANDIDATE")):
            rel = rng.choice(RUN_FILES).replace("C", rng.choice(cells))
            text, fld, line = with_number((inp.run / rel).read_text(), Path(rel).suffix, rng, token)
            target = d / rel

            def setup(d=d, target=target, text=text):
                place("run", inp, d)
                target.write_text(text)

            argv = {
                "report RUN_DIR": ["report", d, "--out", c / "rep", *REP],
                "compare BASELINE": ["compare", d, inp.run, *CMP],
                "compare CANDIDATE": ["compare", inp.run, d, *CMP],
            }[slot]
            out.append(_numbers(c, f"{slot}: {rel} {fld}={token[:12]}", argv, {2}, setup, f"{target}:{line}: {fld} is"))
        elif slot == "report JSONL":  # (parse reads logs, scrapes and bench results, not its own records)
            text, fld, line = with_number(inp.jsonl.read_text(), ".jsonl", rng, token)
            target = c / "n.jsonl"
            argv = ["report", target, "--out", c / "rep", *REP]
            setup = lambda t=target, x=text: t.write_text(x)  # noqa: E731
            out.append(_numbers(c, f"{slot}: {fld}={token[:12]}", argv, {2}, setup, f"{target}:{line}: {fld} is"))
        elif slot == "parse /metrics":
            lines = inp.prom.read_text().splitlines()
            k = rng.choice([j for j, x in enumerate(lines) if x.startswith("vllm:spec_decode")])
            lines[k] = lines[k].rsplit(" ", 1)[0] + " " + token
            target = c / "n.prom"
            setup = lambda t=target, x="\n".join(lines) + "\n": t.write_text(x)  # noqa: E731
            out.append(_numbers(c, f"{slot}: {lines[k][:40]}", ["parse", target], {0, 2}, setup))
        elif slot == "parse vllm bench":
            text, fld, _ = with_number(inp.bench.read_text(), ".json", rng, token)
            target = c / "n.json"
            setup = lambda t=target, x=text: t.write_text(x)  # noqa: E731
            out.append(_numbers(c, f"{slot}: {fld}={token[:12]}", ["parse", target], {0, 2}, setup))
        elif slot in ("validate CONFIG", "run CONFIG"):
            path, _ = rng.choice([(f, "int") for f in INT_FIELDS] + [(f, "float") for f in FLOAT_FIELDS])
            cfg = _base(c / "res")
            if path[1] == "speculative":
                cfg["serve"]["speculative"] = {"draft": MODEL}
            _set_in(cfg, path, "@@N@@")
            value = rng.choice(YAML_NUMBERS)
            text = yaml.safe_dump(cfg, sort_keys=False).replace("'@@N@@'", value)
            target = c / "n.yaml"
            argv = ["validate", target] if slot == "validate CONFIG" else ["run", "--dry-run", target]
            setup = lambda t=target, x=text: t.write_text(x)  # noqa: E731
            out.append(_numbers(c, f"{slot}: {'.'.join(path)}: {value[:12]}", argv, {0, 2}, setup))
        elif slot == "run prompts":
            lines = inp.prompts.read_text().splitlines()
            k = rng.randrange(len(lines))
            lines[k] = lines[k].replace('"id": "', f'"n": {token}, "id": "', 1)
            prompts, target = c / "prompts.jsonl", c / "n.yaml"
            cfg = _base(c / "res")
            cfg["load"]["prompts"] = {"path": str(prompts)}

            def setup(p=prompts, t=target, x="\n".join(lines) + "\n", conf=yaml.safe_dump(cfg)):
                p.write_text(x)
                t.write_text(conf)

            out.append(
                _numbers(
                    c, f"{slot}: {token[:12]}", ["run", "--dry-run", target], {2}, setup, f"{prompts}:{k + 1}: n is"
                )
            )
        else:
            g = c / "n.yaml"
            sign = rng.choice(["-", "+", ""])
            if slot == "compare --gate-file":
                text = f"gates: [acceptance_length:{sign}{token.lower()}%]\n"
            else:
                text = f"e2e_p50_ms: {sign}{token.lower()}%\n"
            flag = slot.split()[1]
            setup = lambda t=g, x=text: t.write_text(x)  # noqa: E731
            argv = ["compare", inp.run, inp.run, flag, g, *CMP]
            out.append(_numbers(c, f"{slot}: {text.strip()[:50]}", argv, {0, 2, 3}, setup))
    return out


def _numbers(c: Path, what: str, argv: list[Any], allowed: set[int], setup: Any, said: str = "") -> Case:
    return Case("numbers in files", what, argv, allowed, said=said, setup=setup, cwd=c)


# Standard streams that fail on every write: a full disk (``> /dev/full``, or a file on one: the
# flush fails), a terminal gone (EIO), a reader that went away (``| head``).
STREAM_FAILURES = ["ENOSPC", "EIO", "EPIPE", "ENOSPC on flush"]


def stream_commands(inp: Inputs, out: Path) -> list[tuple[list[Any], set[int]]]:
    """Every command (and --help, --version) stream_cases runs, with the codes it may end in."""
    return [
        (["--help"], {0}),
        (["--version"], {0}),
        (["report", "--help"], {0}),
        (["run", "--dry-run", inp.config], {0}),
        (["validate", inp.config], {0}),
        (["report", inp.log, "--out", str(out / "rep"), *REP], {0}),  # text: not hashed as an input
        (["compare", inp.run, inp.run, *CMP], {0, 3}),
        (["compare", inp.run, inp.run, "--json", "-", *CMP], {0, 3}),
        (["parse", inp.log], {0}),
        (["parse", inp.log, "--format", "jsonl"], {0}),
        (["parse", inp.log, "--format", "csv"], {0}),
        (["fixtures", "path"], {0}),
        (["envs", "list"], {0}),
        (["report", out / "missing.log", "--out", out / "rep"], {2}),
    ]


def n_stream_cases(inp: Inputs, out: Path) -> int:
    """How many cases stream_cases needs to meet every command with every failure, on each stream."""
    return len(stream_commands(inp, out)) * len(STREAM_FAILURES) * 2


def stream_cases(inp: Inputs, out: Path, n: int) -> list[Case]:
    """Every command of :func:`stream_commands` with standard output, or standard error, failing so:
    a full disk or EIO on stdout is exit 2 with one line naming standard output; a reader gone is
    no error (exit 0, or compare's verdict); stderr that cannot be written changes no exit code.
    No randomness: the ``i``-th case is the same in every run (``n_stream_cases`` covers each)."""
    commands = stream_commands(inp, out)
    cases = []
    for i in range(n):
        argv, ok = commands[i % len(commands)]
        failure = STREAM_FAILURES[(i + i // len(commands)) % len(STREAM_FAILURES)]
        on_stderr = (i // (len(commands) * len(STREAM_FAILURES))) % 2 == 1
        if on_stderr:
            cases.append(Case("standard streams", f"stderr {failure}: {argv[:2]}", argv, ok, stderr=failure))
        elif failure == "EPIPE" or ok == {2}:
            cases.append(Case("standard streams", f"stdout {failure}: {argv[:2]}", argv, ok, stdout=failure))
        else:
            said = "writing the output to standard output"
            cases.append(
                Case("standard streams", f"stdout {failure}: {argv[:2]}", argv, {2}, said=said, stdout=failure)
            )
    return cases

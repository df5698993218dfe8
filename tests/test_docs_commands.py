"""The commands the README, docs/ and the example CI workflow tell users to type exist as written:
every ``specbench <command>`` named there is a command, every ``--flag`` after it is one of that
command's options (or a global one), and every repository path they name exists. Docs drift from
code silently otherwise (``specbench run --results-dir``, a flag ``run`` never had)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from specbench.cli.main import _command

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
WORKFLOW = ROOT / "docs" / "ci" / "github-actions.yml"
WORKFLOWS = sorted((ROOT / "docs" / "ci").glob("*.yml"))  # the gate, the vLLM-upgrade gate
GLOBAL = {"--debug", "--version", "--help"}
# Repository paths the docs hand to commands (things a user's clone has); run outputs are not.
REPO_PATH = re.compile(r"^(configs|results/baselines|benchmarks|docs)/[\w./-]+$")


def _options() -> dict[str, set[str]]:
    group = _command()
    # hidden options are old names kept for old scripts: docs use the current ones
    return {
        name: {
            o
            for p in cmd.params
            if not getattr(p, "hidden", False)
            for o in (*p.opts, *p.secondary_opts)
            if o.startswith("--")
        }
        | GLOBAL
        for name, cmd in group.commands.items()
    }


def _code(markdown: str) -> str:
    """What a Markdown page shows as code: fenced blocks and inline code spans, one per line."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", markdown, flags=re.S | re.M)
    rest = re.sub(r"^```[^\n]*\n.*?^```", "", markdown, flags=re.S | re.M)
    return "\n".join(blocks + re.findall(r"`([^`\n]+)`", rest))


def _invocations(text: str) -> list[list[str]]:
    """Each ``specbench CMD ...`` in ``text``, joined over ``\\`` continuations, as tokens."""
    text = text.replace("\\\n", " ")
    out = []
    for m in re.finditer(r"(?:^|[\s`(])(?:\.venv/bin/)?specbench ([a-z]+)(?=[ \t\n]|$)([^\n`|;&)#]*)", text):
        try:
            tokens = shlex.split(m.group(2).replace("'", " ").replace('"', " "))
        except ValueError:
            tokens = m.group(2).split()
        out.append([m.group(1), *tokens])
    return out


def _workflow_runs(workflow: Path = WORKFLOW) -> str:
    steps = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "run" and isinstance(v, str):
                    steps.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(yaml.safe_load(workflow.read_text()))
    return "\n".join(steps)


def _check(text: str, where: str, options: dict[str, set[str]]) -> list[str]:
    problems = []
    for cmd, *args in _invocations(text):
        if cmd not in options:
            problems.append(f"{where}: specbench {cmd}: no such command")
            continue
        for a in args:
            flag = a.split("=", 1)[0]
            if flag.startswith("--") and flag not in options[cmd]:
                problems.append(f"{where}: specbench {cmd} {flag}: no such option")
            elif REPO_PATH.match(a) and "<" not in a and not (ROOT / a).exists():
                problems.append(f"{where}: specbench {cmd} ... {a}: no such path in the repository")
    return problems


def test_the_example_workflow_names_only_commands_flags_and_paths_that_exist():
    runs = _workflow_runs()
    assert "specbench run" in runs and "specbench compare" in runs and "--junit" in runs
    assert _check(runs, str(WORKFLOW.relative_to(ROOT)), _options()) == []
    for step in runs.splitlines():
        for tok in step.split():
            if tok.startswith("./") and not tok.startswith("./out"):
                assert (ROOT / tok).exists(), tok


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_ci_recipe_names_only_commands_flags_and_paths_that_exist(workflow):
    runs = _workflow_runs(workflow)
    assert "specbench run" in runs and "specbench compare" in runs and "--junit" in runs
    assert _check(runs, str(workflow.relative_to(ROOT)), _options()) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_only_commands_flags_and_paths_that_exist(doc):
    assert _check(_code(doc.read_text(encoding="utf-8")), str(doc.relative_to(ROOT)), _options()) == []


def test_the_checker_catches_a_flag_that_does_not_exist():
    bad = "specbench run configs/default.yaml --results-dir out\nspecbench compare results/baselines/r1 x\n"
    assert _check(bad, "x", _options()) == [
        "x: specbench run --results-dir: no such option",
        "x: specbench compare ... results/baselines/r1: no such path in the repository",
    ]

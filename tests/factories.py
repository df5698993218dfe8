"""Studies, plans and run directories for tests, built one way (tests import it: pytest puts tests/
on the path). Each takes only what a test varies; the rest is the smallest valid study."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specbench.config import Study, parse_study
from specbench.records.files import Manifest
from specbench.results import store
from specbench.run.cells import expand
from specbench.run.runner import RunPlan


def study(
    *,
    matrix: dict[str, list[Any]] | None = None,
    draft: str | None = None,
    baseline: bool | None = None,
    name: str = "t",
    **serve: Any,
) -> Study:
    """A parsed study: model ``org/model``, per-request metrics off, ``matrix`` (default MLA on/off);
    ``draft`` adds a speculative head, ``baseline`` the no-speculation cells, ``serve`` other keys."""
    spec: dict[str, Any] = {
        "name": name,
        "serve": {"model": "org/model", "per_request_metrics": "off", **serve},
        "matrix": {"mla": ["on", "off"]} if matrix is None else matrix,
    }
    if draft is not None:
        spec["serve"]["speculative"] = {"draft": draft}
    if baseline is not None:
        spec["baseline"] = baseline
    return parse_study(spec, "test")


def plan(tmp_path: Path, parsed: Study | None = None, *, status: str = "planned", run_id: str = "r") -> RunPlan:
    """A RunPlan over ``parsed`` (default ``study()``) with its manifest written to ``tmp_path/run``."""
    parsed = study() if parsed is None else parsed
    cells = expand(parsed)
    run_dir = tmp_path / "run"
    manifest = Manifest(run_id=run_id, axes=list(parsed.matrix), cells=[c.cell_id for c in cells], status=status)
    store.write_manifest(run_dir, manifest)
    return RunPlan(study=parsed, cells=cells, run_dir=run_dir, run_id=run_id, manifest=manifest)

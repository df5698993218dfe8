"""The fields issue #58 gave real types stay typed: none of them holds ``Any`` again, the typed
parts name every key the committed runs hold, and a wrong-typed value in one is refused naming it."""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import typing
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from pydantic import BaseModel

from specbench.analysis.windows import RateOnlySummary
from specbench.errors import InputError
from specbench.load.driver import LoadResult
from specbench.load.precision import Batch, Outcome
from specbench.load.workloads import Workload
from specbench.records.cell import LoadAccounting, Precision, PrecisionLook, WorkloadProvenance
from specbench.records.files import Acceptance, Agreement, CellRecord, Manifest

RESULTS = Path(__file__).resolve().parents[2] / "results"

FIELDS = [
    (Precision, "looks"),
    (LoadAccounting, "server"),
    (Agreement, "details"),
    (Manifest, "workloads"),
    (Manifest, "installs"),
    (Batch, "requests"),
    (Outcome, "looks"),
    (Workload, "provenance"),
    (RateOnlySummary, "per_record"),
    (LoadResult, "requests"),
    (LoadResult, "sent"),
]


def _hint(owner: type, name: str) -> Any:
    if isinstance(owner, type) and issubclass(owner, BaseModel):
        return owner.model_fields[name].annotation
    return get_type_hints(owner, include_extras=False)[name]


_BARE = (list, dict, tuple, set, frozenset)


def _bare(tp: Any) -> bool:
    """A container that says nothing of what it holds: ``list``, ``dict``, ``tuple``, ``set``,
    ``frozenset``, a ``collections.abc`` one, or their typing aliases, without type arguments."""
    if get_origin(tp) is not None:  # typing.List, typing.Dict ... (subscripted or not)
        return not get_args(tp) and _bare(get_origin(tp))
    if not isinstance(tp, type):
        return False
    return tp in _BARE or (tp.__module__ == "collections.abc" and issubclass(tp, collections.abc.Iterable))


def _holds_any(tp: Any, seen: set[Any]) -> str | None:
    """Where ``Any`` sits in ``tp``, looking through containers, unions, records, dataclasses and
    TypedDicts (their own fields too), or None. ``object`` and a container without type arguments
    (``list``, ``dict``, ``typing.List`` ...) hold anything: they count as ``Any``."""
    if tp is Any:
        return "Any"
    if tp is object:
        return "object"
    if _bare(tp):
        return f"{getattr(tp, '__name__', tp)!s} without type arguments"
    if get_origin(tp) is typing.Annotated:
        return _holds_any(get_args(tp)[0], seen)
    if get_origin(tp) is not None or isinstance(tp, type(Union[int, str])):
        return next((w for a in get_args(tp) if (w := _holds_any(a, seen))), None)
    if not isinstance(tp, type) or tp in seen:
        return None
    seen.add(tp)
    if issubclass(tp, BaseModel):
        fields = {n: f.annotation for n, f in tp.model_fields.items()}
    elif dataclasses.is_dataclass(tp) or typing.is_typeddict(tp):
        fields = get_type_hints(tp)
    else:
        return None
    return next((f"{tp.__name__}.{n}: {w}" for n, a in fields.items() if (w := _holds_any(a, seen))), None)


@pytest.mark.parametrize(("owner", "name"), FIELDS, ids=[f"{o.__name__}.{n}" for o, n in FIELDS])
def test_the_field_holds_no_any(owner, name):
    assert _holds_any(_hint(owner, name), set()) is None


@pytest.mark.parametrize(
    "tp",
    [
        Any,
        object,
        list,
        dict,
        tuple,
        set,
        frozenset,
        typing.List,
        typing.Dict,
        collections.abc.Mapping,
        collections.abc.Sequence,
        list[object],
        dict[str, list],
        typing.Optional[dict],
        tuple[int, typing.Annotated[set, "x"]],
    ],
    ids=repr,
)
def test_a_bare_container_or_object_counts_as_any(tp):
    assert _holds_any(tp, set()) is not None


@pytest.mark.parametrize(
    "tp", [int, str, bytes, Path, list[int], dict[str, tuple[int, ...]], typing.Optional[set[str]]]
)
def test_a_typed_container_holds_no_any(tp):
    assert _holds_any(tp, set()) is None


def test_a_load_result_names_no_spec():
    """ "spec" is what a cell claims to run (records.cell.Spec); a load's result says what it sent."""
    assert "spec" not in {f.name for f in dataclasses.fields(LoadResult)}


def _manifests() -> list[Path]:
    return sorted(RESULTS.rglob("manifest.json"))


def test_committed_workloads_and_installs_hold_only_named_keys():
    """Every key a committed manifest's workloads and installs hold is a field of its part (none
    kept as an unknown extra), and the committed runs have both kinds."""
    seen = {"workloads": 0, "installs": 0}
    for path in _manifests():
        m = Manifest.model_validate(json.loads(path.read_text()))
        for kind, parts in (("workloads", m.workloads), ("installs", m.installs)):
            for key, part in parts.items():
                if part is not None:
                    seen[kind] += 1
                    assert not part.model_extra, f"{path}: {kind}[{key}] keys not typed: {sorted(part.model_extra)}"
    assert seen["workloads"] and seen["installs"]


def test_provenance_is_one_type_in_memory_and_stored():
    assert _hint(Workload, "provenance") is WorkloadProvenance
    assert get_args(_hint(Manifest, "workloads"))[1] == typing.Optional[WorkloadProvenance]
    assert get_args(_hint(Outcome, "looks")) == (PrecisionLook,) == get_args(_hint(Precision, "looks"))


def _cell(precision: dict[str, Any]) -> dict[str, Any]:
    return {"cell_id": "c", "status": "done", "precision": precision}


def test_a_wrong_typed_look_is_refused_naming_the_field():
    look = {"requests": 20, "n_units": 20, "half_widths": {"acceptance_length": 0.1}}
    assert CellRecord.parse(_cell({"looks": [look]}), "cell.json").dump()["precision"]["looks"] == [look]
    with pytest.raises(
        InputError, match=r"^cell.json: precision\.looks\[0\]\.requests: input should be a valid integer"
    ):
        CellRecord.parse(_cell({"looks": [{**look, "requests": "20"}]}), "cell.json")
    with pytest.raises(InputError, match=r"precision\.looks\[0\]\.half_widths\.acceptance_length: "):
        CellRecord.parse(_cell({"looks": [{**look, "half_widths": {"acceptance_length": "narrow"}}]}), "cell.json")


def test_a_wrong_typed_server_count_or_install_is_refused_naming_the_field():
    server = {"http_status": {"2xx": 3}, "sent": 3, "http_failed": 0, "finished": {"length": 3}, "completed": 3}
    rec = {"cell_id": "c", "status": "done", "load_accounting": {"timed_out": False, "server": server}}
    assert CellRecord.parse(rec, "cell.json").dump() == rec
    bad = {**rec, "load_accounting": {"server": {**server, "finished": {"length": 3.5}}}}
    with pytest.raises(InputError, match=r"^cell.json: load_accounting\.server\.finished\.length: "):
        CellRecord.parse(bad, "cell.json")
    with pytest.raises(
        InputError, match=r"^manifest.json: installs\.0\.31\.0\.created: input should be a valid boolean"
    ):
        Manifest.parse({"run_id": "r", "cells": [], "installs": {"0.31.0": {"created": "no"}}}, "manifest.json")


def test_agreement_details_name_the_counts_that_differ():
    acc = {"agreement": {"logs_vs_prometheus": False, "details": {"logs": {"num_drafts": [40, 100]}}}}
    details = Acceptance.parse(acc, "acceptance.json").agreement.details
    assert str(details["logs"]) == "{'num_drafts': [40, 100]}"  # as report's warning prints it
    with pytest.raises(InputError, match=r"agreement\.details\.logs\.num_drafts: "):
        Acceptance.parse({"agreement": {"details": {"logs": {"num_drafts": [40]}}}}, "acceptance.json")


def test_summary_json_gets_llmperf_labels_then_its_accounting(tmp_path):
    """write_outputs: the extra labels, then the accounting as llmperf_account built it (key order kept)."""
    from specbench.load.driver import LoadSent, write_outputs
    from specbench.records.cell import LoadAccounting

    acc = {"requested": 3, "timed_out": False, "server": {"sent": 3, "completed": 3}, "acceptance_covers": "all"}
    sent = LoadSent(
        concurrency=2, accounting=LoadAccounting.model_validate(acc), summary_extra={"specbench_load_driver": "llmperf"}
    )
    write_outputs(LoadResult(requests=[], started_at="", duration_s=1.0, model="m", sent=sent), tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary)[-1] == "specbench_llmperf_accounting"
    assert summary["specbench_load_driver"] == "llmperf" and summary["specbench_llmperf_accounting"] == acc
    assert list(summary["specbench_llmperf_accounting"]) == list(acc)

"""The mismatch guard (specbench/compare/guard.py): every field it promises to check is checked."""

from __future__ import annotations

import copy

import pytest

from specbench.compare.guard import _FIELDS, mismatches, unchecked
from specbench.compare.sides import load_side
from specbench.testing.simruns import MANIFEST, P

CELL = [{"axes": {"mla": "on"}, "p": P, "units": 5, "drafts": 10}]


def _changed(path: tuple[str, ...]) -> dict:
    """A manifest override with the value at ``path`` replaced by something different."""
    top = copy.deepcopy(MANIFEST.get(path[0]))
    if len(path) == 1:
        return {path[0]: f"other-{top}"}
    node = top
    for part in path[1:-1]:
        node = node[part]
    was = node.get(path[-1])
    # a value of the same type (the manifest's machine is typed: a count stays an integer)
    if isinstance(was, (int, float)) and not isinstance(was, bool):
        node[path[-1]] = was + 1
    elif isinstance(was, list):
        node[path[-1]] = [*was, {"name": "other", "memory": "1 MiB", "driver": "1"}]
    else:
        node[path[-1]] = f"other-{was}"
    return {path[0]: top}


@pytest.mark.parametrize("label, path", _FIELDS, ids=[f[0] for f in _FIELDS])
def test_each_field_difference_is_reported(make_run, label, path):
    base = load_side(make_run("base", CELL, seed=1))
    cand = load_side(make_run("cand", CELL, seed=1, manifest=_changed(path)))
    lines = mismatches(base, cand)
    assert len(lines) == 1 and lines[0].startswith(f"{label}: baseline "), lines


def test_the_promised_fields_are_all_there():
    """model, draft, k, prompts, sampling and machine (docs/gate.md): none may be dropped silently."""
    labels = {f[0] for f in _FIELDS}
    assert {
        "vLLM version",
        "model",
        "draft",
        "k (num_speculative_tokens)",
        "prompt set",
        "temperature",
        "max_tokens",
        "sampling seed",
        "number of requests",
        "machine CPU",
        "machine CPU count",
        "machine memory (GiB)",
        "machine GPUs",
    } <= labels


def test_measured_k_per_cell(make_run):
    base = load_side(make_run("base", CELL, seed=1))
    cand = load_side(make_run("cand", [{**CELL[0], "p": P[:2]}], seed=1))
    assert any("k baseline 3, candidate 2" in line for line in mismatches(base, cand))


def test_single_files_are_said_to_be_unchecked(tmp_path, make_run):
    base = load_side(make_run("base", CELL, seed=1))
    assert unchecked(base, base) is None
    assert mismatches(base, base) == []


def test_a_precision_driven_candidate_against_a_fixed_baseline_is_not_like_for_like(make_run):
    """A precision-driven run records num_requests at its default: the guard must see until and
    max_requests. A manifest written before they existed (results/baselines/*) lacks both keys:
    that is a fixed load, the same as ``until: null``."""
    load = copy.deepcopy(MANIFEST["resolved_config"])
    assert "until" not in load["load"]  # as in the committed baselines
    base = load_side(make_run("base", CELL, seed=1))
    fixed = copy.deepcopy(load)
    fixed["load"].update(until=None, max_requests=None)
    assert mismatches(base, load_side(make_run("fixed", CELL, seed=1, manifest={"resolved_config": fixed}))) == []
    steered = copy.deepcopy(load)
    steered["load"].update(until={"ci_half_width": {"acceptance_length": 0.05}}, max_requests=400)
    lines = mismatches(base, load_side(make_run("steered", CELL, seed=1, manifest={"resolved_config": steered})))
    assert [line.split(":")[0] for line in lines] == ["precision-driven load (load.until)", "max_requests"], lines


def test_a_methods_own_draft_is_compared_and_absent_means_none(make_run):
    """``serve.speculative.drafts`` (each method's own head): a run before it (no key) is a run with
    none; two runs whose EAGLE-3 heads differ are not like for like."""
    cfg = copy.deepcopy(MANIFEST["resolved_config"])
    assert "drafts" not in cfg["serve"]["speculative"]  # as in runs before per-method drafts
    base = load_side(make_run("base", CELL, seed=1))

    def with_drafts(name, drafts):
        c = copy.deepcopy(cfg)
        c["serve"]["speculative"]["drafts"] = drafts
        return load_side(make_run(name, CELL, seed=1, manifest={"resolved_config": c}))

    assert mismatches(base, with_drafts("none", {})) == []
    one, other = with_drafts("one", {"eagle3": "org/head-a"}), with_drafts("other", {"eagle3": "org/head-b"})
    lines = mismatches(one, other)
    assert lines == [
        "draft per method (speculative.drafts): baseline {'eagle3': 'org/head-a'}, candidate {'eagle3': 'org/head-b'}"
    ]

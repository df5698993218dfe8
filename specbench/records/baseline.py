"""Which baseline a speculative cell is measured against: the one of the same repeat that serves the
same target, i.e. has the same value on every *target axis* (mla, every ``env:``/``flag:`` and load
axis not listed in the study's ``baseline.draft_axes``); speculative axes only change the draft.

Written once for the runner (which pairs cells when it interleaves them, run/interleave.py) and the
readers (report/baseline_pairs.py, compare/cellwise.py), over a cell's axes and a run's manifest.
A run from before one baseline per target combination (run/cells.py) has a baseline only at the
target axes' first values; :func:`pick_baseline` finds none for the other cells.
"""

from __future__ import annotations

from typing import Any, Iterable, TypeVar

from specbench.axis import SPEC_AXES, axis_label, parse_axis
from specbench.records.files import Manifest

T = TypeVar("T")


def is_target_axis(axis: str, draft_axes: Iterable[str] = ()) -> bool:
    """Whether ``axis`` (raw ``env:FOO`` or its label ``FOO``) changes the target model's serving.

    Speculative axes (output_norm, k, draft) and the study's ``baseline.draft_axes`` only change the
    draft; everything else (mla, env:, flag:) may change the target's numerics or speed. Load axes
    (load:concurrency, ...) count as target axes: a speed-up at concurrency 8 needs a baseline
    measured at concurrency 8.
    """
    draft = set(draft_axes) | {axis_label(a) for a in draft_axes}
    if parse_axis(axis, strict=False).only_drafts:  # a speculative: field, or a speculative built-in
        return False
    return axis not in SPEC_AXES and axis_label(axis) not in SPEC_AXES and axis not in draft


def target_mismatch(spec_axes: dict[str, Any], base_axes: dict[str, Any], draft_axes: Iterable[str] = ()) -> list[str]:
    """Target axes on which a speculative cell and a baseline differ (empty: a matching pair)."""
    draft_axes = list(draft_axes)
    names = [a for a in dict.fromkeys([*spec_axes, *base_axes]) if is_target_axis(a, draft_axes)]
    return [a for a in names if str(spec_axes.get(a)) != str(base_axes.get(a))]


def draft_axes_of(manifest: Manifest | None) -> list[str]:
    """A run's ``baseline.draft_axes`` from its manifest (absent in runs from before they existed)."""
    cfg = (manifest.resolved_config if manifest is not None else None) or {}
    base = cfg.get("baseline") if isinstance(cfg, dict) else None
    return list(base.get("draft_axes") or []) if isinstance(base, dict) else []


def pick_baseline(
    spec_axes: dict[str, Any],
    repeat: Any,
    baselines: Iterable[tuple[dict[str, Any], Any, T]],
    draft_axes: Iterable[str] = (),
) -> T | None:
    """The baseline of ``baselines`` (``(axes, repeat, item)``) to measure a speculative cell against:
    same repeat, same value on every target axis. None when the run has no such baseline (never a
    baseline that serves a different target)."""
    draft_axes = list(draft_axes)
    for axes, rep, item in baselines:
        if rep == repeat and not target_mismatch(spec_axes, axes, draft_axes):
            return item
    return None

"""Titles and terminal tables shared by ``report`` and ``compare``.

A cell is shown by the axis values that tell it apart (``MLA on · norm off``), not by its id
(``mla-on__output_norm-off__r0``): axes that take one value in the whole run are left out, the
repeat only when the run has several, and a baseline is "no spec" with its target axes (its
speculative axes read "none", which is not a value anyone chose).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from specbench.render import format as fmt

# Short names of the axes a study usually has; any other axis is shown by its label as is.
AXIS_NAMES = {
    "mla": "MLA",
    "output_norm": "norm",
    "num_speculative_tokens": "k",
    "k": "k",
    "pos0_mask": "pos0 mask",
    "draft": "draft",
    "method": "method",
}
NONE = "none"
SEP = " · "


def axis_name(axis: str) -> str:
    """Short name: ``output_norm`` -> ``norm``; specbench's own env axes without their prefix
    (``SPECBENCH_POS0_MASK`` -> ``pos0 mask``); any other axis as is."""
    if axis in AXIS_NAMES:
        return AXIS_NAMES[axis]
    if axis.startswith("SPECBENCH_"):
        return axis[len("SPECBENCH_") :].lower().replace("_", " ")
    return axis


def varying_axes(cells: Iterable[dict[str, Any]]) -> list[str]:
    """Axes (in first-seen order) that take more than one value among ``cells``' speculative ones;
    all axes when none varies (a one-cell run still gets a title)."""
    cells = list(cells)
    values: dict[str, set[str]] = {}
    for axes in cells:
        for k, v in axes.items():
            if str(v) != NONE:
                values.setdefault(k, set()).add(str(v))
    varying = [k for k, vs in values.items() if len(vs) > 1]
    return varying or list(values)


def cell_title(
    axes: dict[str, Any] | None,
    *,
    is_baseline: bool = False,
    show: Sequence[str] | None = None,
    repeat: int | None = None,
    fallback: str = "",
) -> str:
    """``MLA on · norm off`` (``show``: which axes, default all); ``no spec · MLA on`` for a
    baseline; `` · r1`` appended when ``repeat`` is given."""
    axes = axes or {}
    keys = [k for k in (show if show is not None else axes) if k in axes and str(axes[k]) != NONE]
    parts = [f"{axis_name(k)} {axes[k]}" for k in keys]
    if is_baseline:
        parts.insert(0, "no spec")
    if repeat is not None:
        parts.append(f"r{repeat}")
    return fmt.one_line(SEP.join(parts) or fallback)


def titles(cells: Sequence[tuple[str, dict[str, Any] | None, bool, int | None]]) -> dict[str, str]:
    """``{id: title}`` for ``(id, axes, is_baseline, repeat)`` of one run: the varying axes, the
    repeat only when there are several; the id itself when two cells would share a title."""
    show = varying_axes(axes for _, axes, _, _ in cells if axes)
    repeats = {r for _, _, _, r in cells if r is not None}
    out = {
        cid: cell_title(axes, is_baseline=base, show=show, repeat=r if len(repeats) > 1 else None, fallback=cid)
        if axes is not None
        else fmt.one_line(cid)
        for cid, axes, base, r in cells
    }
    if len(set(out.values())) < len(out):  # ambiguous: ids are unique
        return {cid: fmt.one_line(cid) for cid, _, _, _ in cells}
    return out


def column_chunks(widths: Sequence[int], first: int, total: int) -> list[range]:
    """Split columns of ``widths`` into runs that fit ``total`` characters beside a ``first``
    column (rich adds 3 per column for padding and rule); at least one column per chunk."""
    chunks, start, used = [], 0, first + 4
    for i, w in enumerate(widths):
        if i > start and used + w + 3 > total:
            chunks.append(range(start, i))
            start, used = i, first + 4
        used += w + 3
    chunks.append(range(start, len(widths)))
    return [c for c in chunks if len(c)]

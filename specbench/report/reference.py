"""The change of every cell against one reference cell: ``report``'s "Change vs reference" table
and figure.

Which cell is the reference: ``--reference CELL`` (a cell id, ``run id/cell id`` or the cell's title
as the tables print it), else the first speculative cell of the first run in run order, i.e. every
axis at its first value. Not the config's ``baseline: true`` cell: that one serves without
speculation and has no acceptance to subtract.

Each change is the reference-to-cell difference with the interval ``report``'s "Differences between
cells" section uses (:func:`specbench.analysis.deltas.acceptance_deltas`: t with jackknife SE over
each cell's units, unpaired), so a cell that also differs from the reference in one axis gets the
same interval here and there. Pure: drawing is :func:`reference_figure`.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.analysis.deltas import Delta, acceptance_deltas
from specbench.errors import ConfigError
from specbench.render import format as fmt

# the statistics of the table, in order: AL, then p_0 .. p_(k-1) of the positions both cells have
AL = "mean_acceptance_length"


@dataclass
class ReferenceDelta:
    """One cell against the reference: ``deltas`` maps a statistic (``mean_acceptance_length``,
    ``p0`` ..) to its change cell − reference with its CI."""

    label: str
    deltas: dict[str, Delta]

    def positions(self) -> int:
        k = 0
        while f"p{k}" in self.deltas:
            k += 1
        return k


@dataclass
class ReferenceView:
    reference: str  # the reference group's label
    rows: list[ReferenceDelta]
    chosen: bool  # given with --reference (else the default)


def pick_reference(groups: list, wanted: str | None, title=lambda label: label) -> str | None:
    """The reference group's label; None when fewer than two groups have units (nothing to set
    against). ``wanted`` names a group by label or title; ConfigError naming ``--reference`` when it
    names none, or a group without acceptance data."""
    usable = [g for g in groups if g.units]
    if wanted is None:
        return usable[0].label if len(usable) >= 2 else None
    names = {g.label: g for g in groups}
    names.update({title(g.label): g for g in groups if title(g.label) not in names})
    found = names.get(wanted)
    if found is None:
        shown = ", ".join(repr(title(g.label)) for g in groups[:8]) + (" …" if len(groups) > 8 else "")
        raise ConfigError(
            f"report: --reference {fmt.one_line(wanted)!r} names no cell; give a cell id or title: {shown}"
        )
    if not found.units:
        raise ConfigError(
            f"report: --reference {fmt.one_line(wanted)!r} has no acceptance data to set the others against; "
            "name a finished speculative cell"
        )
    return found.label


def reference_view(
    groups: list, wanted: str | None, confidence: float, title=lambda label: label
) -> ReferenceView | None:
    """Every other group with units against the reference (None when there is no reference)."""
    ref_label = pick_reference(groups, wanted, title)
    if ref_label is None:
        return None
    ref = next(g for g in groups if g.label == ref_label)
    rows = [
        ReferenceDelta(g.label, acceptance_deltas(ref.units, g.units, confidence))
        for g in groups
        if g.units and g.label != ref_label
    ]
    return ReferenceView(ref_label, rows, wanted is not None) if rows else None


def reference_rows(view: ReferenceView, title=lambda label: label) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the "Change vs reference" table: ΔAL, then Δp_i in pp, each with its CI."""
    k = max(r.positions() for r in view.rows)
    header = ["cell", "ΔAL"] + [f"Δp_{i} (pp)" for i in range(k)]
    out = []
    for r in view.rows:
        cells = [title(r.label), _shown(r.deltas.get(AL), 1.0, 2)]
        cells += [_shown(r.deltas.get(f"p{i}"), 100.0, 1) for i in range(k)]
        out.append(cells)
    return header, out


def _shown(d: Delta | None, scale: float, digits: int) -> str:
    if d is None or d.point is None:
        return fmt.MISSING
    ci = (d.ci[0] * scale, d.ci[1] * scale) if d.ci is not None else None
    return fmt.with_ci(d.point * scale, ci, digits, sign=True, no_ci="(no CI)")


def reference_figure(view: ReferenceView, groups: list, confidence: float, title=lambda label: label):
    """Per cell: p_i of the reference and the cell (each with its own CI) over Δp_i with its CI;
    :func:`specbench.render.plots.position_deltas.overlay_figure`, which compare draws its gate with."""
    # lazy: matplotlib only when the figure is drawn
    from specbench.render.plots.position_deltas import Band, DeltaRow, bands, overlay_figure

    units = {g.label: g.units for g in groups}
    ref = bands(units[view.reference], confidence=confidence)
    panels: list[tuple[str, Band | None, Band | None, DeltaRow | None]] = []
    for r in view.rows:
        k = r.positions()
        row = DeltaRow(
            [r.deltas[f"p{i}"].point for i in range(k)],
            [r.deltas[f"p{i}"].ci for i in range(k)],
            [None] * k,
            [""] * k,
        )
        panels.append((fmt.one_line(title(r.label)), ref, bands(units[r.label], confidence=confidence), row))
    return overlay_figure(
        panels,
        confidence,
        names=("reference", "cell"),
        interval="(t, jackknife SE, unpaired)",
        heading=f"Per-position acceptance against the reference, {fmt.one_line(title(view.reference))}: "
        "levels (top), change (bottom)",
    )

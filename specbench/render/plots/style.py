"""One visual language for every plot: each study axis encoded once, one shared legend, one way to
draw an interval.

Colour shows the axis with the most values (ties: the one written last, which varies fastest),
line style the next, marker the third; a legend entry per axis value (``norm off``), not per cell
id. Groups without axes (log files) get one colour each and their label. Intervals are always
points with error bars (caps), never bands, so report and compare read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from specbench.render.format import one_line
from specbench.render.tables import axis_name, cell_title, varying_axes

COLOURS = [
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
    "tab:cyan",
    "tab:gray",
]
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P"]
NONE = "none"


@dataclass
class Style:
    label: str  # the group label the data is keyed by
    title: str  # axis values, e.g. "MLA on · norm off"
    color: str = "tab:blue"
    linestyle: str = "-"
    marker: str = "o"

    def kw(self) -> dict[str, Any]:
        return {"color": self.color, "linestyle": self.linestyle, "marker": self.marker}


@dataclass
class Encoding:
    styles: dict[str, Style]
    keys: list[tuple[str, list[tuple[str, dict[str, Any]]]]]  # (axis, [(value label, line kw)]) for the legend

    def style(self, label: str, index: int = 0) -> Style:
        if label in self.styles:
            return self.styles[label]
        return Style(label, label, COLOURS[index % len(COLOURS)])


def encode(groups: Sequence[tuple[str, dict[str, Any] | None]]) -> Encoding:
    """Styles for ``(label, axes)`` groups: colour, line style and marker each bound to one axis
    when every group has axes and at most three vary; else one colour per group."""
    with_axes = [(lab, {k: str(v) for k, v in ax.items()}) for lab, ax in groups if ax]
    varying = varying_axes(ax for _, ax in with_axes) if with_axes else []
    distinct = len({tuple(sorted(ax.items())) for _, ax in with_axes}) == len(with_axes)  # several runs: not
    if (
        len(with_axes) != len(groups)
        or not distinct
        or not varying
        or len(varying) > 3
        or any(
            len({ax.get(a) for _, ax in with_axes}) > len(pal)
            for a, pal in zip(_order(varying, with_axes), (COLOURS, LINESTYLES, MARKERS))
        )
    ):
        styles = {
            lab: Style(
                lab,
                cell_title(ax, show=varying, fallback=lab) if ax and distinct else one_line(lab),
                COLOURS[i % len(COLOURS)],
                "-",
                "o",
            )
            for i, (lab, ax) in enumerate(groups)
        }
        return Encoding(
            styles, [("", [(s.title, {"color": s.color, "linestyle": "-", "marker": "o"}) for s in styles.values()])]
        )
    order = _order(varying, with_axes)
    palettes = [("color", COLOURS), ("linestyle", LINESTYLES), ("marker", MARKERS)]
    values = {a: list(dict.fromkeys(ax[a] for _, ax in with_axes if ax.get(a, NONE) != NONE)) for a in order}
    styles, keys = {}, []
    for lab, ax in with_axes:
        kw = {"color": "black", "linestyle": "-", "marker": "o"}
        for a, (attr, pal) in zip(order, palettes):
            if ax.get(a, NONE) != NONE:
                kw[attr] = pal[values[a].index(ax[a])]
        styles[lab] = Style(lab, cell_title(ax, show=varying), **kw)
    for a, (attr, pal) in zip(order, palettes):
        entries = []
        for i, v in enumerate(values[a]):
            kw = {"color": "gray", "linestyle": "-", "marker": "None"}
            kw[attr] = pal[i]
            if attr != "linestyle":
                kw["linestyle"] = "None" if attr == "marker" else "-"
            entries.append((one_line(f"{axis_name(a)} {v}"), kw))
        keys.append((axis_name(a), entries))
    return Encoding(styles, keys)


def _order(varying: list[str], groups: list[tuple[str, dict[str, str]]]) -> list[str]:
    """Axes by number of values, most first; ties: the later axis first (it varies fastest)."""
    idx = {a: i for i, a in enumerate(varying)}
    return sorted(varying, key=lambda a: (-len({ax.get(a) for _, ax in groups}), -idx[a]))


def shared_legend(fig, enc: Encoding, extra: list[tuple[str, dict[str, Any]]] | None = None) -> None:
    """One legend for the whole figure, under it: an entry per axis value (or per group)."""
    from matplotlib.lines import Line2D

    handles, labels = [], []
    for _, entries in enc.keys:
        for text, kw in entries:
            handles.append(Line2D([], [], linewidth=2, markersize=6, **kw))
            labels.append(text)
    for text, kw in extra or []:
        handles.append(Line2D([], [], **kw))
        labels.append(text)
    if handles:
        fig.legend(
            handles,
            labels,
            loc="outside lower center",
            ncols=legend_columns(fig, labels),
            fontsize="small",
            frameon=False,
        )


# "small" text (~8 pt): about 0.075 in a character, plus the marker and the gap between entries
_CHAR_IN, _ENTRY_IN = 0.075, 0.6


def legend_columns(fig, labels: list[str]) -> int:
    """As many columns (at most 6) as the figure's width holds for its longest label: a long axis
    value (``synthetic_acceptance_rates [0.9,0.7,0.5]``) in 6 columns ran past both edges."""
    width = fig.get_size_inches()[0]
    entry = max(len(t) for t in labels) * _CHAR_IN + _ENTRY_IN
    return max(1, min(len(labels), 6, int(width // entry)))


def draw_ci(
    ax, xs, ys, lo, hi, style: Style | None = None, *, horizontal: bool = False, label: str | None = None, **kw
) -> None:
    """Points with their interval as error bars (missing ends drawn as no bar)."""
    import math

    err_lo = [0.0 if (lo_ is None or math.isnan(lo_)) else max(y - lo_, 0.0) for y, lo_ in zip(ys, lo)]
    err_hi = [0.0 if (hi_ is None or math.isnan(hi_)) else max(hi_ - y, 0.0) for y, hi_ in zip(ys, hi)]
    opts = dict(style.kw() if style else {}, capsize=3, markersize=5, linewidth=1.5, elinewidth=1.2, label=label)
    opts.update(kw)
    if horizontal:
        ax.errorbar(ys, xs, xerr=[err_lo, err_hi], **opts)
    else:
        ax.errorbar(xs, ys, yerr=[err_lo, err_hi], **opts)


def noted(figure, note: str):
    """``figure`` with ``note`` (which run, model, k, vLLM and load it shows) as the title of its
    first legend: laid out with it, so it neither overlaps the legend nor is cut; under the axes
    (a figure-wide x label) when the figure has no figure legend."""
    if not note:
        return figure
    if figure.legends:
        figure.legends[0].set_title(note, prop={"size": "x-small"})
    else:
        figure.supxlabel(note, fontsize="x-small")
    return figure

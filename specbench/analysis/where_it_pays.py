"""Where speculation pays on a run, in one line: the concurrencies at which some speculative cell is
known to be faster than serving without speculation, the best setting there, and where it is not.

Read per concurrency over every speculative cell measured there (speed-up in output tok/s over the
no-speculation baseline at the same concurrency, with its interval, :mod:`specbench.analysis.speedup`):

* **pays**: some cell's interval lies above 1x; the best is the fastest such cell;
* **does not pay**: every cell's interval lies below 1x;
* **not known**: neither (an interval includes 1x).

The k advice, the speed-up-vs-concurrency figure, the final screen and the report's answers all
say it with :func:`where_it_pays`, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONCURRENCY = "concurrency"  # axis_label("load:concurrency")
K_AXES = ("num_speculative_tokens", "k")


@dataclass(frozen=True)
class Level:
    concurrency: int | None  # None: the run has no concurrency axis (one load concurrency)
    verdict: str  # pays | does not pay | not known
    best: Any  # the Speedup with the highest point estimate among the deciding cells
    setting: str  # what the best cell varies, e.g. "k=3" ("" for a run with one speculative setting)


def _setting(axes: dict[str, str]) -> str:
    parts = []
    for name, value in sorted(axes.items()):
        if name == CONCURRENCY:
            continue
        parts.append(f"k={value}" if name in K_AXES else f"{name}={value}")
    return ", ".join(parts)


def levels(speedups: list[Any], cell_axes: dict[str, dict[str, str]]) -> list[Level]:
    """One :class:`Level` per concurrency measured (ascending), or one for a run without the axis."""
    by: dict[int | None, list[Any]] = {}
    for s in speedups:
        value = (cell_axes.get(s.cell) or {}).get(CONCURRENCY)
        by.setdefault(int(value) if value is not None and str(value).isdigit() else None, []).append(s)
    out = []
    for conc in sorted(by, key=lambda c: -1 if c is None else c):
        cells = by[conc]
        iv = {id(s): s.intervals.get("output_tok_per_s") for s in cells}
        above = [s for s in cells if iv[id(s)] is not None and iv[id(s)][0] > 1]
        below = [s for s in cells if iv[id(s)] is not None and iv[id(s)][1] < 1]
        if above:
            verdict, pool = "pays", above
        elif len(below) == len(cells):
            verdict, pool = "does not pay", cells
        else:
            verdict, pool = "not known", cells
        best = max(pool, key=lambda s: s.point["output_tok_per_s"])
        out.append(Level(conc, verdict, best, _setting(cell_axes.get(best.cell) or {})))
    return out


def _ranges(values: list[int]) -> str:
    """1, 2, 4 measured, all paying -> "1-4"; gaps between measured levels are not claimed."""
    return f"{values[0]}-{values[-1]}" if len(values) > 1 else str(values[0])


def _num(x: float) -> str:
    return f"{x:.2f}" if x == x else "n/a"


def _figure(level: Level) -> str:
    s = level.best
    lo, hi = s.intervals["output_tok_per_s"]
    where = f" at concurrency {level.concurrency}" if level.concurrency is not None else ""
    what = f"{level.setting}: " if level.setting else ""
    return f"{what}{_num(s.point['output_tok_per_s'])}× [{_num(lo)}, {_num(hi)}]{where}"


def where_it_pays(speedups: list[Any], cell_axes: dict[str, dict[str, str]]) -> str | None:
    """The one line (module docstring); None for a run without a speed-up."""
    found = levels(speedups, cell_axes)
    if not found:
        return None
    if found[0].concurrency is None:  # one concurrency: the run's load
        lv = found[0]
        if lv.verdict == "pays":
            return f"Speculation pays on this run: best {_figure(lv)} output tok/s over no speculation."
        if lv.verdict == "does not pay":
            return f"Speculation does not pay on this run: every speculative cell is slower (best {_figure(lv)})."
        return f"Speculation is not known to pay on this run: best {_figure(lv)}, its interval includes 1×."
    pays = [lv for lv in found if lv.verdict == "pays"]
    rest = [lv for lv in found if lv.verdict != "pays"]  # ascending concurrency, as levels() gives them
    parts = []
    if pays:
        top = max(pays, key=lambda lv: lv.best.point["output_tok_per_s"])
        at = _ranges([lv.concurrency or 0 for lv in pays])
        parts.append(f"Speculation pays on this run at concurrency {at} (best {_figure(top)})")
    else:
        parts.append("Speculation is not known to pay at any concurrency on this run")
    for verdict in dict.fromkeys(lv.verdict for lv in rest):  # in the order of their lowest concurrency
        these = [lv for lv in rest if lv.verdict == verdict]
        said = "does not pay" if verdict == "does not pay" else "is not known to pay"
        parts.append(f"it {said} at {', '.join(str(lv.concurrency) for lv in these)} (best {_figure(these[-1])})")
    return "; ".join(parts) + "."

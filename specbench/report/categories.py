"""Acceptance by prompt category inside each speculative cell (``specbench report`` on run directories).

Acceptance depends on the text (Spec-Bench reports it per task), so a cell whose prompts carry
categories (MT-bench's 8, the built-in 5) is split by them: per category, AL and p_i with the same
interval as every cell (:func:`specbench.analysis.intervals.cell_intervals`) over its prompts, a
prompt's requests summed into one unit (a greedy repeat is no new evidence). One contrast per cell:
its highest-AL category against its lowest, unpaired (different prompts), with the interval compare
uses for unpaired units (:func:`specbench.analysis.deltas.acceptance_deltas`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specbench.analysis.deltas import acceptance_deltas
from specbench.analysis.intervals import cell_intervals
from specbench.analysis.windows import window_k
from specbench.records.counts import Counts
from specbench.records.requests import RequestRecord

# A category needs this many prompts for its row to carry an interval worth reading.
MIN_PROMPTS = 2


@dataclass
class CategoryRow:
    cell: str
    workload: str
    category: str
    n_prompts: int
    al: float
    al_ci: tuple[float, float] | None
    p: list[float] = field(default_factory=list)
    p_ci: list[tuple[float, float] | None] = field(default_factory=list)


@dataclass
class CategoryContrast:
    cell: str
    high: str
    low: str
    delta: float
    ci: tuple[float, float] | None
    why: str = ""

    def sentence(self) -> str:
        if self.ci is None:
            return f"{self.high} vs {self.low}: AL {self.delta:+.2f} (no interval: {self.why})"
        significant = "significant" if self.ci[0] > 0 or self.ci[1] < 0 else "not significant"
        return f"{self.high} vs {self.low}: AL {self.delta:+.2f} [{self.ci[0]:+.2f}, {self.ci[1]:+.2f}], {significant}"


def prompt_units(rows: list[RequestRecord]) -> dict[tuple[str, str], dict[str, Counts]]:
    """``{(workload, category): {prompt key: counts summed over its requests}}`` for the rows with
    complete per-request counts (a cell without them gives ``{}``)."""
    out: dict[tuple[str, str], dict[str, Counts]] = {}
    for req in rows:
        sd = req.spec_decode
        if req.error or sd is None or not sd.complete or not sd.num_drafts:
            continue
        key = (req.workload or "builtin", req.category or "?")
        prompt = req.prompt_sha256 or req.prompt_id or str(req.id)
        c = sd.counts(origin=f"request {req.id}")
        units = out.setdefault(key, {})
        units[prompt] = units[prompt] + c if prompt in units else c
    return out


def category_rows(cell: str, rows: list[RequestRecord]) -> tuple[list[CategoryRow], CategoryContrast | None]:
    """The cell's rows per category (only when it has two or more) and its high-vs-low contrast."""
    groups = prompt_units(rows)
    if len(groups) < 2:
        return [], None
    out = []
    for (workload, category), units in sorted(groups.items()):
        us = list(units.values())
        iv = cell_intervals(us)
        k = max((window_k(u) or 0) for u in us)
        has_ci = len(us) >= MIN_PROMPTS and not iv.degenerate
        out.append(
            CategoryRow(
                cell=cell,
                workload=workload,
                category=category,
                n_prompts=len(us),
                al=iv.point["mean_acceptance_length"],
                al_ci=iv["mean_acceptance_length"] if has_ci else None,
                p=[iv.point.get(f"p{i}", float("nan")) for i in range(k)],
                p_ci=[iv.get(f"p{i}") if has_ci else None for i in range(k)],
            )
        )
    ranked = sorted(out, key=lambda r: r.al)
    low, high = ranked[0], ranked[-1]
    # The pair is chosen after looking at the data: Bonferroni over every pair of categories keeps
    # the chosen pair's interval at 95% (it would hold for whichever pair was shown).
    pairs = len(out) * (len(out) - 1) // 2
    d = acceptance_deltas(
        list(groups[(low.workload, low.category)].values()),
        list(groups[(high.workload, high.category)].values()),
        confidence=1 - 0.05 / pairs,
    )["mean_acceptance_length"]
    contrast = CategoryContrast(cell, high.category, low.category, float(d.point or 0.0), d.ci, d.why)
    return out, contrast


def _iv(x: float, ci: tuple[float, float] | None, digits: int) -> str:
    return f"{x:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else " (no CI)")


def render_categories(per_cell: list[tuple[list[CategoryRow], CategoryContrast | None]], md_table, title) -> list[str]:
    """Markdown lines of the section (empty when no cell has two categories)."""
    rows = [r for rs, _ in per_cell for r in rs]
    if not rows:
        return []
    k = max(len(r.p) for r in rows)
    header = ["cell", "workload", "category", "prompts", "AL [95% CI]", *(f"p{i}" for i in range(k))]
    body = [
        [title(r.cell), r.workload, r.category, str(r.n_prompts), _iv(r.al, r.al_ci, 2)]
        + [f"{p:.3f}" for p in r.p]
        + [""] * (k - len(r.p))
        for r in rows
    ]
    out = [
        "## Acceptance by prompt category",
        "",
        "Each speculative cell split by its prompts' category (MT-bench's 8, the built-in sets' 5): AL = 1 + A/D "
        "and p_i (unconditional) over the category's prompts, a prompt's requests summed into one unit; the "
        "interval is the cell interval over those units. Per cell, its highest-AL category against its lowest "
        "(unpaired: different prompts; t interval, jackknife SE, df = min(n) - 1; Bonferroni over the "
        "category pairs, since the pair is picked after looking). Few prompts per category "
        "give wide intervals: a category contrast needs the category's own prompts, not more requests.",
        "",
        md_table(header, body),
        "",
    ]
    out += [f"- {title(c.cell)}: {c.sentence()}" for _, c in per_cell if c is not None]
    return out + [""]


def category_records(per_cell: list[tuple[list[CategoryRow], CategoryContrast | None]]) -> list[dict[str, Any]]:
    """categories.csv rows."""
    out = []
    for rows, _ in per_cell:
        for r in rows:
            rec: dict[str, Any] = {
                "cell": r.cell,
                "workload": r.workload,
                "category": r.category,
                "prompts": r.n_prompts,
                "acceptance_length": r.al,
                "acceptance_length_ci_low": r.al_ci[0] if r.al_ci else None,
                "acceptance_length_ci_high": r.al_ci[1] if r.al_ci else None,
            }
            for i, p in enumerate(r.p):
                rec[f"p{i}"] = p
            out.append(rec)
    return out

"""The statistics derived from exact acceptance counts (docs/methods.md "Counts and definitions").

:class:`~specbench.records.counts.Counts` (the one typed form of the counts) is what gets summed:
windows, requests and scrape differences all become Counts, and every statistic is recomputed from
the sums (a ratio estimator), never averaged across windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specbench.records.counts import Counts

# Counts is imported from here by most of analysis, compare, load and the tests.
__all__ = [
    "DEFINITION",
    "AcceptanceStats",
    "Counts",
    "acceptance",
    "conditional_from_unconditional",
    "total",
]

DEFINITION = (
    "unconditional per-position acceptance p_i = accepted_per_position[i] / num_drafts (vLLM's definition); "
    "conditional alpha_i = p_i / p_(i-1), alpha_0 = p_0; "
    "mean acceptance length AL = 1 + accepted_tokens / num_drafts (includes the bonus token); "
    "draft acceptance rate DAR = accepted_tokens / draft_tokens"
)

# Slack for comparing ratios of exact integers (only float noise, nothing printed).
_EXACT_TOL = 1e-9


def total(units: list[Counts]) -> Counts | None:
    """Sum of ``units`` (the pooled counts), None when there are none: the one way Counts are summed."""
    if not units:
        return None
    out = units[0]
    for u in units[1:]:
        out = out + u
    return out


@dataclass
class AcceptanceStats:
    """Statistics derived from :class:`Counts` (computed, never taken from printed rates)."""

    counts: Counts
    mean_acceptance_length: float  # 1 + A/D (includes the bonus token)
    draft_acceptance_rate: float  # A / draft_tokens
    per_position: list[float]  # p_i = accepted_per_position[i] / D (unconditional)
    conditional: list[float]  # alpha_i = p_i / p_{i-1}, alpha_0 = p_0
    warnings: list[str] = field(default_factory=list)


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def conditional_from_unconditional(p: list[float]) -> list[float]:
    """alpha_0 = p_0, alpha_i = p_i / p_(i-1) (nan where the previous position accepted nothing)."""
    return [p[0]] + [_ratio(p[i], p[i - 1]) for i in range(1, len(p))] if p else []


def acceptance(counts: Counts) -> AcceptanceStats:
    """Derive AL, DAR, p_i and alpha_i from ``counts`` and check the count invariants (as warnings)."""
    c = counts
    where = f" ({c.origin})" if c.origin else ""
    warnings: list[str] = []
    al = 1 + _ratio(c.accepted_tokens, c.num_drafts)
    dar = _ratio(c.accepted_tokens, c.draft_tokens)
    p = [_ratio(x, c.num_drafts) for x in (c.accepted_per_position or [])]
    alpha = conditional_from_unconditional(p)
    if c.num_drafts == 0:
        warnings.append(f"no drafts{where}: acceptance is undefined")
        return AcceptanceStats(c, al, dar, p, alpha, warnings)

    if c.accepted_per_position is not None:
        s = sum(c.accepted_per_position)
        # With reconstructed positions rounding may move the sum by up to one per position.
        slack = len(c.accepted_per_position) if "accepted_per_position" in c.derived else 0
        if abs(s - c.accepted_tokens) > slack:
            warnings.append(
                f"invariant AL = 1 + sum(p_i) broken{where}: sum of accepted_per_position {s} "
                f"!= accepted_tokens {c.accepted_tokens}"
            )
        if any(later > earlier for earlier, later in zip(c.accepted_per_position, c.accepted_per_position[1:])):
            warnings.append(f"per-position acceptance increases with position{where}: {[round(x, 3) for x in p]}")
    k = c.num_spec_tokens or (len(c.accepted_per_position) if c.accepted_per_position else None)
    if k and c.draft_tokens == k * c.num_drafts and abs(dar - (al - 1) / k) > _EXACT_TOL:
        warnings.append(f"invariant DAR = (AL - 1)/k broken{where}: DAR {dar:.4f}, (AL-1)/k {(al - 1) / k:.4f}")
    if c.accepted_tokens > c.draft_tokens:
        warnings.append(f"accepted_tokens {c.accepted_tokens} > draft_tokens {c.draft_tokens}{where}")
    return AcceptanceStats(c, al, dar, p, alpha, warnings)

"""The metric registry: every metric compare knows, with its direction, unit and data source.

One place, so gates, tables, Markdown and JUnit agree on what "worse" means for each metric.
Acceptance metrics come from Counts (bootstrap over request or window units); latency metrics
from per-request rows (bootstrap the median over requests) or, without rows, summary.json.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # "tokens", "fraction", "ms", "tok/s"
    higher_is_better: bool
    source: str  # "acceptance" | "requests" | "summary" | "study" (against the run's baseline cell)
    indexed: bool = False  # per position: per_position[i], conditional[i]
    stat_prefix: str | None = None  # key prefix in analysis intervals ("p" -> p0, p1, ...)
    description: str = ""

    @property
    def is_fraction(self) -> bool:
        return self.unit == "fraction"


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric(
            "mean_acceptance_length",
            "tokens",
            True,
            "acceptance",
            description="AL = 1 + accepted_tokens / num_drafts (includes the bonus token)",
        ),
        Metric(
            "draft_acceptance_rate", "fraction", True, "acceptance", description="DAR = accepted_tokens / draft_tokens"
        ),
        Metric(
            "per_position",
            "fraction",
            True,
            "acceptance",
            indexed=True,
            stat_prefix="p",
            description="p_i = accepted_per_position[i] / num_drafts (unconditional)",
        ),
        Metric(
            "conditional",
            "fraction",
            True,
            "acceptance",
            indexed=True,
            stat_prefix="a",
            description="alpha_i = p_i / p_(i-1), alpha_0 = p_0",
        ),
        Metric("ttft_p50_ms", "ms", False, "requests", description="median time to first token"),
        Metric("itl_p50_ms", "ms", False, "requests", description="median inter-token latency"),
        Metric("e2e_p50_ms", "ms", False, "requests", description="median end-to-end latency"),
        Metric("output_tok_per_s", "tok/s", True, "summary", description="output throughput of the load"),
        Metric(
            "speedup",
            "x",
            True,
            "study",
            description="output tok/s (Σ tokens / Σ e2e over requests) over the run's no-speculation baseline cell",
        ),
        Metric(
            "divergence_share",
            "fraction",
            False,
            "study",
            description="share of prompts whose greedy output differs from the run's baseline cell",
        ),
    ]
}

ALIASES = {
    "acceptance_length": "mean_acceptance_length",
    "al": "mean_acceptance_length",
    "dar": "draft_acceptance_rate",
    "p": "per_position",
    "alpha": "conditional",
    "tok/s": "output_tok_per_s",
}


def resolve(name: str) -> Metric | None:
    """The metric called ``name`` (aliases allowed, in any case: ``AL``, ``DAR``), or None."""
    return METRICS.get(name) or METRICS.get(ALIASES.get(name.lower(), name.lower()))


# What every table prints for a position (p_0, α_1) and what users type back: p_0, p0, alpha_1, α_1, a1.
_SHORT_POSITION = re.compile(r"^(?P<m>p|alpha|a|α)_?(?P<i>\d+|\*)(?=:)", re.IGNORECASE)


def expand_short(expr: str) -> str:
    """``p_0:-2pp`` -> ``per_position[0]:-2pp``; ``α_1:...`` -> ``conditional[1]:...``; else unchanged."""
    m = _SHORT_POSITION.match(expr)
    if not m:
        return expr
    name = "per_position" if m["m"].lower() == "p" else "conditional"
    return f"{name}[{m['i']}]{expr[m.end() :]}"


def row_name(metric: Metric, index: int | str | None) -> str:
    """How a metric instance is named in tables and gate results: ``per_position[0]``."""
    return f"{metric.name}[{index}]" if metric.indexed else metric.name


def stat_key(metric: Metric, index: int | None) -> str:
    """The key of this metric in :mod:`specbench.analysis.intervals` intervals."""
    return f"{metric.stat_prefix}{index}" if metric.indexed else metric.name

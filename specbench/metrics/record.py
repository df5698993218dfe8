"""The canonical record (docs/contracts.md): one per metric line/scrape/summary that was read.

Values are exactly as printed; percentages become fractions; a field the text does not carry is
``None`` and is never inferred here (derived values belong to :mod:`specbench.analysis`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from specbench.records.counts import Counts

Source = Literal["vllm", "sglang", "prometheus", "vllm-bench-serve", "vllm-offline"]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass
class _Located:
    """Where a record was read: the fields every record kind shares, in the canonical order."""

    source: str
    format: str
    file: str | None = None
    line: int | None = None
    time: str | None = None
    pid: int | None = None
    engine: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON object: ``kind`` first, then the fields in declaration order.

        Built field by field rather than with ``dataclasses.asdict`` (which deep-copies through
        generic recursion, ~60 us a record): `specbench parse` writes millions of these."""
        names = _FIELD_NAMES.get(type(self))
        if names is None:
            names = _FIELD_NAMES[type(self)] = tuple(f.name for f in fields(self) if f.name != "kind")
        d: dict[str, Any] = {"kind": self.kind}  # type: ignore[attr-defined]
        for name in names:
            value = getattr(self, name)
            d[name] = list(value) if isinstance(value, list) else value  # a copy, as asdict made
        return d


@dataclass
class SpecDecodeRecord(_Located):
    """A ``SpecDecoding metrics:`` line, a scrape's spec-decode series or a printed summary.

    The count fields are the canonical record's, each ``None`` when the text does not print it (so
    the record cannot hold a :class:`Counts`, whose counts are all required); :meth:`counts` gives
    the Counts when it printed them all. Counts from a partial record (drafts reconstructed from
    ``draft_tokens / k``, positions from printed rates) are analysis's to derive, labelled as derived
    (:mod:`specbench.analysis.windows`)."""

    cumulative: bool = False
    num_spec_tokens: int | None = None
    num_drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    emitted_tokens: int | None = None
    accepted_per_position: list[int] | None = None
    per_position_acceptance: list[float] | None = None
    mean_acceptance_length: float | None = None
    draft_acceptance_rate: float | None = None
    accepted_throughput: float | None = None
    drafted_throughput: float | None = None
    system_efficiency: float | None = None
    current_depth: int | None = None
    kind: str = field(default="spec_decode")

    def counts(self) -> Counts | None:
        """The exact counts as printed (origin: the file), or None when any of the three is missing."""
        d, t, a = self.num_drafts, self.draft_tokens, self.accepted_tokens
        if d is None or t is None or a is None:
            return None
        pos = self.accepted_per_position
        return Counts(d, t, a, None if pos is None else list(pos), self.num_spec_tokens, origin=self.file)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SpecDecodeRecord":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class EngineStatsRecord(_Located):
    """An ``Engine 000: Avg prompt throughput ...`` line; gives its engine id to the next spec line."""

    prompt_throughput: float | None = None
    generation_throughput: float | None = None
    running_reqs: int | None = None
    waiting_reqs: int | None = None
    kind: str = field(default="engine_stats")


Record = SpecDecodeRecord | EngineStatsRecord

"""Exact acceptance counts: the one typed form of a cell's, window's or request's counts.

:class:`Counts` is what parsers give (``SpecDecodeRecord.counts()``), what the statistics sum and
take (:mod:`specbench.analysis.rates`), and what ``acceptance.json`` validates and writes (its
``counts`` objects, :mod:`specbench.records.files`): no second class, no converter.

A plain dataclass rather than a pydantic model: statistics build and add Counts in loops (the
jackknife, window sums, precision's per-request totals) where a validating constructor would cost
more than the arithmetic, and the positional constructor ``Counts(d, t, a, pos, k)`` is the one
tests and analysis use. Records validate it through :meth:`Counts.__get_pydantic_core_schema__`
(strict integers, at most MAX_POSITIONS positions, 0 <= k <= MAX_POSITIONS), which imports
pydantic only when a record is built, so ``specbench parse`` and ``--help`` stay free of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

# The most draft positions anything reads: the log parsers drop per-position values past it and records
# refuse more (an acceptance.json claiming 10^6 positions took minutes and gigabytes to report).
MAX_POSITIONS = 256

# The keys of a ``counts`` object in acceptance.json, in the order they are written.
WRITTEN = ("num_drafts", "draft_tokens", "accepted_tokens", "accepted_per_position", "num_spec_tokens", "derived")


@dataclass(slots=True)
class Counts:
    """Exact counts over some set of verify steps ("drafts").

    ``derived`` names fields that analysis computed rather than read (e.g. ``num_drafts`` from
    ``draft_tokens / k``, ``accepted_per_position`` from printed rates); ``origin`` says where the
    counts came from (``file:line``), for warnings and plots; ``origin`` and ``time`` are never written.
    """

    num_drafts: int
    draft_tokens: int
    accepted_tokens: int
    accepted_per_position: list[int] | None = None
    num_spec_tokens: int | None = None
    derived: tuple[str, ...] = ()
    origin: str | None = None
    time: str | None = None

    def __add__(self, other: Counts) -> Counts:
        if not isinstance(other, Counts):
            return NotImplemented
        pos = None
        a, b = self.accepted_per_position, other.accepted_per_position
        if a is not None and b is not None and len(a) == len(b):
            pos = [x + y for x, y in zip(a, b)]
        k = self.num_spec_tokens if self.num_spec_tokens == other.num_spec_tokens else None
        derived = tuple(dict.fromkeys(self.derived + other.derived))
        if (a is None) != (b is None) or (a is not None and b is not None and len(a) != len(b)):
            derived = tuple(dict.fromkeys(derived + ("accepted_per_position dropped (mixed lengths)",)))
        return Counts(
            num_drafts=self.num_drafts + other.num_drafts,
            draft_tokens=self.draft_tokens + other.draft_tokens,
            accepted_tokens=self.accepted_tokens + other.accepted_tokens,
            accepted_per_position=pos,
            num_spec_tokens=k,
            derived=derived,
        )

    def at(self, origin: str | None) -> Counts:
        """The same counts labelled with where they were read (a copy: records keep theirs)."""
        return replace(self, accepted_per_position=_copy(self.accepted_per_position), origin=origin)

    def to_dict(self) -> dict[str, Any]:
        """The ``counts`` object as acceptance.json writes it (the keys of :data:`WRITTEN`)."""
        return {
            "num_drafts": self.num_drafts,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "accepted_per_position": _copy(self.accepted_per_position),
            "num_spec_tokens": self.num_spec_tokens,
            "derived": list(self.derived),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, origin: str | None = None) -> Counts:
        """Counts from a ``counts``-shaped dict read loosely (numbers may be floats or strings, other
        keys ignored; tests and benchmarks build Counts from plain rows with it); raises
        KeyError/TypeError/ValueError on a bad shape. Records read strictly, through the pydantic
        schema below, and a request row's counts through :meth:`specbench.records.requests.SpecDecode.counts`."""
        pos = d.get("accepted_per_position")
        return cls(
            num_drafts=int(d["num_drafts"]),
            draft_tokens=int(d["draft_tokens"]),
            accepted_tokens=int(d["accepted_tokens"]),
            accepted_per_position=None if pos is None else [int(x) for x in pos],
            num_spec_tokens=None if d.get("num_spec_tokens") is None else int(d["num_spec_tokens"]),
            derived=tuple(d.get("derived") or ()),
            origin=origin,
        )

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """How records validate and write a ``counts`` object: strict types, the keys of
        :data:`WRITTEN` in that order (``origin`` and ``time`` are not written), unknown keys
        ignored; Counts a writer built are validated again (``revalidate_instances``), so a
        writer gets the reader's checks."""
        from pydantic_core import core_schema as cs  # lazy: pydantic only where records are built

        def nullable(schema: Any) -> Any:
            return cs.with_default_schema(cs.nullable_schema(schema), default=None)

        count = cs.int_schema(strict=True)
        fields = [
            cs.dataclass_field("num_drafts", count),
            cs.dataclass_field("draft_tokens", count),
            cs.dataclass_field("accepted_tokens", count),
            cs.dataclass_field("accepted_per_position", nullable(cs.list_schema(count, max_length=MAX_POSITIONS))),
            cs.dataclass_field("num_spec_tokens", nullable(cs.int_schema(strict=True, ge=0, le=MAX_POSITIONS))),
            cs.dataclass_field(
                "derived",
                cs.with_default_schema(
                    cs.no_info_after_validator_function(
                        tuple,
                        cs.list_schema(cs.str_schema(strict=True)),
                        serialization=cs.plain_serializer_function_ser_schema(list),
                    ),
                    default=(),
                ),
            ),
            # labels of the Counts in memory, never written
            cs.dataclass_field("origin", nullable(cs.str_schema()), serialization_exclude=True),
            cs.dataclass_field("time", nullable(cs.str_schema()), serialization_exclude=True),
        ]
        return cs.dataclass_schema(
            cls,
            cs.dataclass_args_schema(cls.__name__, fields, extra_behavior="ignore"),
            [f["name"] for f in fields],
            revalidate_instances="always",
            slots=True,
        )


def _copy(pos: list[int] | None) -> list[int] | None:
    return None if pos is None else list(pos)


def invalid_reason(c: Counts) -> str | None:
    """Why these counts cannot be real (negative, accepted > drafted, p_i > 1), or None.

    Such counts come from a counter reset, a damaged file or a misparsed line; they are input
    errors to report and leave out, never numbers to put in a table."""
    fields = {"num_drafts": c.num_drafts, "draft_tokens": c.draft_tokens, "accepted_tokens": c.accepted_tokens}
    fields.update({f"accepted_per_position[{i}]": x for i, x in enumerate(c.accepted_per_position or [])})
    neg = [f"{k} {v}" for k, v in fields.items() if v < 0]
    if neg:
        return "negative count: " + ", ".join(neg)
    if c.accepted_tokens > c.draft_tokens:
        return f"accepted_tokens {c.accepted_tokens} > draft_tokens {c.draft_tokens}"
    over = [i for i, x in enumerate(c.accepted_per_position or []) if x > c.num_drafts]
    if over:
        i = over[0]
        return (
            f"p_{i} > 1: accepted_per_position[{i}] {c.accepted_per_position[i]} > "  # type: ignore[index]
            f"num_drafts {c.num_drafts}"
        )
    return None

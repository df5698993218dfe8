"""A request's row: one line of ``requests.jsonl`` (:class:`RequestRecord`), with its spec-decode
counts (:class:`SpecDecode`). Below the statistics in the layers, so analysis (speed-up, divergence)
reads rows through the same model the run directory's readers use."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Iterable, Mapping, Optional, Sequence, TypedDict, Union

from annotated_types import Len
from pydantic import ConfigDict, Field, StrictInt, StrictStr, ValidationError

from specbench.errors import InputError
from specbench.records.base import K, Num, Positions, Record, first_problem
from specbench.records.counts import MAX_POSITIONS, Counts


class SpecDecode(Record):
    """A request's spec-decode counts (vLLM's per-request metrics, canonicalised by the driver).

    Every count is optional (a server may report some), so the row keeps them as written and
    :meth:`counts` gives the :class:`Counts` when all three are there."""

    num_spec_tokens: Optional[K] = None
    num_drafts: Optional[StrictInt] = None
    draft_tokens: Optional[StrictInt] = None
    accepted_tokens: Optional[StrictInt] = None
    accepted_per_position: Optional[Positions] = None
    acceptance_histogram: Optional[Annotated[list[StrictInt], Len(0, MAX_POSITIONS + 1)]] = None
    per_step_accepted: Optional[list[StrictInt]] = None
    per_step_drafted: Optional[list[StrictInt]] = None

    @property
    def complete(self) -> bool:
        """All three counts present (a request's Counts can be built)."""
        return None not in (self.num_drafts, self.draft_tokens, self.accepted_tokens)

    def counts(self, origin: str | None = None) -> Counts:
        drafts, drafted, accepted = self.num_drafts, self.draft_tokens, self.accepted_tokens
        if drafts is None or drafted is None or accepted is None:  # not self.complete
            raise ValueError(f"incomplete spec_decode counts{f' ({origin})' if origin else ''}")
        return Counts(
            num_drafts=drafts,
            draft_tokens=drafted,
            accepted_tokens=accepted,
            accepted_per_position=self.accepted_per_position,
            num_spec_tokens=self.num_spec_tokens,
            origin=origin,
        )


class RequestRecord(Record):
    """One line of ``requests.jsonl`` (built-in driver, llmperf or ``vllm bench serve`` rows).

    Readers tag rows with the cell's repeat under ``_repeat`` (never written): :attr:`repeat`.
    Keys this model does not name (another writer's, e.g. llmperf's ``error_msg``) stay on the
    record: :meth:`extra`."""

    model_config = ConfigDict(extra="allow", strict=True, validate_assignment=True, populate_by_name=True)

    id: Optional[Union[StrictInt, StrictStr]] = None
    prompt_id: Optional[StrictStr] = None
    category: Optional[StrictStr] = None
    workload: Optional[StrictStr] = None  # builtin, mt-bench, sharegpt, jsonl:PATH
    prompt_sha256: Optional[StrictStr] = None  # of the raw first user turn, before any chat template
    start_s: Optional[Num] = None
    ttft_s: Optional[Num] = None
    # Validated as floats (an int gap reads as x.0): half the cost of an int-or-float union per
    # element, and requests.jsonl is only read through this model, never rewritten.
    itl_s: Optional[list[float]] = None
    e2e_s: Optional[Num] = None
    output_tokens: Optional[Num] = None
    input_tokens: Optional[Num] = None
    chunks: Optional[StrictInt] = None
    text: Optional[StrictStr] = None
    token_ids: Optional[list[StrictInt]] = None
    finish_reason: Optional[StrictStr] = None
    itl_method: Optional[StrictStr] = None
    error: Optional[StrictStr] = None
    error_code: Optional[Union[StrictInt, StrictStr]] = None
    spec_decode: Optional[SpecDecode] = None
    # load.interleave (run/interleave.py): the block it was sent in, the same on both servers
    block: Optional[StrictInt] = None
    repeat: Optional[StrictInt] = Field(default=None, alias="_repeat", exclude=True)

    @property
    def ok(self) -> bool:
        """Finished without an error."""
        return not self.error and not self.error_code

    def extra(self, key: str) -> Any:
        """The value of a key this model does not name (None when the row has none)."""
        return (self.model_extra or {}).get(key)


class RequestRow(TypedDict, total=False):
    """A request's row as a load driver builds it and ``requests.jsonl`` holds it, before it is read
    back as a :class:`RequestRecord` (whose fields these are), plus the keys a driver adds that the
    record keeps unnamed (llmperf's per-chunk ITL and dropped flag, an unreadable spec-decode object)."""

    id: Union[int, str]
    prompt_id: Optional[str]
    category: Optional[str]
    workload: Optional[str]
    prompt_sha256: Optional[str]
    start_s: Optional[float]
    ttft_s: Optional[float]
    itl_s: Optional[list[float]]
    e2e_s: Optional[float]
    llmperf_inter_token_latency_s: Optional[float]
    output_tokens: Optional[int]
    input_tokens: Optional[int]
    chunks: Optional[int]
    text: Optional[str]
    token_ids: Optional[list[int]]
    finish_reason: Optional[str]
    itl_method: Optional[str]
    error: Optional[str]
    error_code: Optional[Union[int, str]]
    spec_decode: Optional[dict[str, Union[int, list[int]]]]  # SpecDecode's fields
    spec_decode_error: str
    block: int
    llmperf_dropped: bool
    error_msg: Optional[str]  # llmperf's own, in rows of older runs


# Requests as records, or as plain rows still to validate (a load driver's result, tests, benchmarks).
Rows = Sequence[Union[RequestRecord, RequestRow, dict[str, Any]]]


def requests_of(rows: Rows, file: Path | str = "requests") -> list[RequestRecord]:
    """Rows as :class:`RequestRecord` (records pass through as they are); InputError naming the
    row and field of a damaged one."""
    return [r if isinstance(r, RequestRecord) else _validated(r, f"{file}:{n}") for n, r in enumerate(rows, 1)]


def numbered_requests(
    numbered: Iterable[tuple[int, dict[str, Any]]], file: Path | str, repeat: Any
) -> list[RequestRecord]:
    """The ``(line number, row)`` pairs of a ``requests.jsonl`` validated once as records, each
    tagged with its cell's ``repeat``; InputError naming ``file:line`` and the field of a damaged one."""
    return [_validated({**row, "_repeat": repeat}, f"{file}:{line}") for line, row in numbered]


def _validated(row: Mapping[str, object], where: str) -> RequestRecord:
    try:
        return RequestRecord.model_validate(row)
    except ValidationError as exc:
        raise InputError(f"{where}: {first_problem(exc)}; re-run the cell or delete the file") from None


def errored(row: RequestRecord | RequestRow | dict[str, Any]) -> bool:
    """Whether a request failed: ``error`` or ``error_code`` set, or llmperf's own ``error_msg``; for
    a row as written (a dict) and as a record alike, so the checks of raw rows and the readers of
    records leave out the same requests."""
    if isinstance(row, RequestRecord):
        return not row.ok or bool(row.extra("error_msg"))
    return bool(row.get("error") or row.get("error_code") or row.get("error_msg"))

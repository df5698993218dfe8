"""Typed records of a run directory: what ``manifest.json``, ``cell.json`` and ``acceptance.json``
hold (docs/contracts.md "Results directory"); a line of ``requests.jsonl`` is
:class:`specbench.records.requests.RequestRecord`, a ``counts`` object :class:`specbench.records.counts.Counts`.

Writers build these models and save ``record.dump()``; readers get them from :func:`load`, which
validates the file once, so code past the loader reads attributes instead of guessing at dict
shapes (``"cells": [1]``, ``"prometheus": [1, 2]``), and a damaged file is refused naming the file
and the field (InputError, exit 2).

On-disk format: ``dump()`` gives exactly the keys the writer set (``exclude_unset``), in the order
the fields are declared here, which is the order specbench has always written them; unknown keys
(a newer writer's) are kept and written back, except inside a ``counts`` object, which is always
its six keys (Counts). Types are strict (a count is an integer, never ``true`` or ``"3"``), fields
are optional where older files (results/baselines/*) lack them. ``schema_version`` is checked by
:func:`specbench.io.load_json` and written by ``save_json``; the models only carry it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

from annotated_types import Len
from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator

from specbench.io import load_json
from specbench.records.base import Fractions, Interval, K, Num, R, Record, Scalar
from specbench.records.cell import (
    Attested,
    GateSubset,
    HeadSwitch,
    HeadSwitchFallback,
    LoadAccounting,
    LoadSettings,
    LogWindowWait,
    Machine,
    PairedBaseline,
    Part,
    Precision,
    PreparedInstall,
    ServerGroup,
    Spec,
    WorkloadProvenance,
    ordered_dump,
)
from specbench.records.counts import Counts, invalid_reason
from specbench.records.requests import Rows, requests_of
from specbench.redact import redact_text


# -- acceptance ----------------------------------------------------------------------------------
# Each ``counts`` object is a Counts (specbench/records/counts.py): validated and written through it.
class Total(Record):
    counts: Optional[Counts] = None


class Windows(Record):
    counts: Optional[Counts] = None
    windows: list[Counts] = Field(default_factory=list)


class PerRequest(Record):
    counts: Optional[Counts] = None
    units: list[Counts] = Field(default_factory=list)


# One count of two sources that differ: [this source's, Prometheus's] (accepted_per_position: lists).
CountPair = Annotated[list[Optional[StrictInt]], Len(2, 2)]
PositionsPair = Annotated[list[Optional[list[StrictInt]]], Len(2, 2)]


class CountsMismatch(Part):
    """How a source's counts differ from Prometheus's (specbench/run/collect.py ``counts_equal``):
    each count field that differs, or which side had no counts (``missing``: "a" or "b")."""

    num_drafts: Optional[CountPair] = None
    draft_tokens: Optional[CountPair] = None
    accepted_tokens: Optional[CountPair] = None
    accepted_per_position: Optional[PositionsPair] = None
    missing: Optional[StrictStr] = None

    def __str__(self) -> str:
        return str(self.dump())


class Agreement(Record):
    logs_vs_prometheus: Optional[StrictBool] = None
    per_request_vs_prometheus: Optional[StrictBool] = None
    details: dict[str, CountsMismatch] = Field(default_factory=dict)  # "logs", "per_request": what differs


class Derived(Record):
    mean_acceptance_length: Optional[Num] = None
    draft_acceptance_rate: Optional[Num] = None
    per_position: Fractions = Field(default_factory=list)
    conditional: Fractions = Field(default_factory=list)


class CI(Record):
    unit: Optional[StrictStr] = None
    method: Optional[StrictStr] = None  # "jackknife-t"; records written before it have none: percentile bootstrap
    confidence: Optional[Num] = None
    n_units: Optional[StrictInt] = None
    degenerate: Optional[StrictBool] = None
    intervals: dict[str, Interval] = Field(default_factory=dict)

    def interval(self, name: str) -> tuple[float | None, float | None]:
        lo_hi = self.intervals.get(name)
        return (lo_hi[0], lo_hi[1]) if lo_hi else (None, None)


class Acceptance(Record):
    """``acceptance.json``: one cell's counts from three sources, their agreement, derived figures, CI."""

    definition: Optional[StrictStr] = None
    num_spec_tokens: Optional[K] = None
    baseline: Optional[StrictBool] = None  # baseline cells only (no speculation)
    spec_metrics: Optional[StrictStr] = None  # baseline: "absent" | "zero" | "present"
    baseline_ok: Optional[StrictBool] = None
    prometheus: Total = Field(default_factory=Total)
    logs: Windows = Field(default_factory=Windows)
    per_request: Optional[PerRequest] = None
    agreement: Agreement = Field(default_factory=Agreement)
    derived: Derived = Field(default_factory=Derived)
    ci: Optional[CI] = None
    warnings: list[StrictStr] = Field(default_factory=list)

    @property
    def total(self) -> Counts | None:
        """The exact Prometheus counts (the point estimate's input), or None."""
        return self.prometheus.counts

    def intervals(self) -> dict[str, Interval]:
        return self.ci.intervals if self.ci is not None else {}


def ci_units(requests: list[Counts] | None, windows: list[Counts], total: Counts | None) -> tuple[list[Counts], str]:
    """The units a cell's confidence interval runs over, and their kind: the one choice, made for
    acceptance.json (run/collect.py), ``report`` (report/inputs.py), ``compare`` (compare/sides.py)
    and the precision stop rule (load/precision.py), so all four print the same interval.

    Per-request units, else log windows: two or more that drafted, preferring a kind whose units
    all carry per-position counts (else no p_i interval); a unit that drafted nothing adds nothing
    to the sums but would count as a draw (n, df), so it is left out. Fewer than two of either:
    the exact total, one unit, kind "total" (no interval). Invalid units are the callers' to drop
    (each names them in its own warnings)."""
    req = [u for u in requests or [] if u.num_drafts]
    win = [u for u in windows if u.num_drafts]
    for units, kind in ((req, "request"), (win, "window")):
        if len(units) > 1 and all(u.accepted_per_position is not None for u in units):
            return units, kind
    for units, kind in ((req, "request"), (win, "window")):
        if len(units) > 1:
            return units, kind
    return ([total] if total is not None and total.num_drafts else []), "total"


def acceptance_units(acc: Acceptance, where: str | Path) -> tuple[list[Counts], str, list[str]]:
    """A stored cell's CI units, their kind, and a warning for each unit left out: what ``report``
    and ``compare`` both read from an acceptance.json. Counts no real run could give (more accepted
    than drafted, ...) are named and left out, never pooled; :func:`ci_units` chooses from the rest."""
    warnings: list[str] = []

    def valid(units: list[Counts], name: str) -> list[Counts]:
        out = []
        for i, u in enumerate(units):
            field = f"{name}[{i}]"
            bad = invalid_reason(u)
            if bad:
                warnings.append(f"{where}: {field}: invalid counts ({bad}); left out")
            else:
                out.append(u.at(f"{where} {field}"))
        return out

    req = valid(list(acc.per_request.units) if acc.per_request is not None else [], "per_request.units")
    win = valid(list(acc.logs.windows), "logs.windows")
    total = valid([acc.total] if acc.total is not None else [], "prometheus.counts")
    units, kind = ci_units(req, win, total[0] if total else None)
    return units, kind, warnings


# -- cell and manifest ---------------------------------------------------------------------------
class Timings(Record):
    startup_s: Optional[Num] = None
    load_s: Optional[Num] = None
    collect_s: Optional[Num] = None


# What a cell.json's status can be: "failed" until the cell's steps all ran (run/lifecycle.py),
# then "done"; the others are older or interrupted runs'. Anything else is a damaged file.
CELL_STATUSES = ("done", "failed", "interrupted", "running", "planned", "skipped")
# A speculative cell's load finished but /metrics shows no drafts: its failure reason (run/measure.py),
# which compare reads as "speculation off" (a regression against a baseline that drafted).
NO_SPEC_COUNTS = "no spec-decode counts in /metrics after the load (is speculation on?)"


class CellRecord(Record):
    """``cell.json``: what ran, how it ended, and where. Field order is the file's key order."""

    cell_id: StrictStr
    axes: dict[str, Optional[Scalar]] = Field(default_factory=dict)
    repeat: Optional[StrictInt] = None
    is_baseline: Optional[StrictBool] = None
    status: StrictStr
    reason: Optional[StrictStr] = None
    exit_status: Optional[StrictInt] = None
    log_tail: Optional[StrictStr] = None
    argv: Optional[list[StrictStr]] = None
    env: dict[str, Optional[StrictStr]] = Field(default_factory=dict)
    host: Optional[StrictStr] = None
    port: Optional[StrictInt] = None
    vllm_version: Optional[StrictStr] = None
    started_at: Optional[StrictStr] = None
    ended_at: Optional[StrictStr] = None
    timings: Timings = Field(default_factory=Timings)
    log_window_wait: Optional[LogWindowWait] = None
    load_accounting: Optional[LoadAccounting] = None  # llmperf: requests asked / recorded / failed / seen
    pid: Optional[StrictInt] = None

    @field_validator("reason", "log_tail")
    @classmethod
    def _shown_text(cls, v: str | None) -> str | None:
        # shown by report and compare (stdout, Markdown, JUnit): a secret in a server's last words
        # that the run's own scrub missed stays hidden
        return None if v is None else redact_text(v)

    @field_validator("status")
    @classmethod
    def _known_status(cls, v: str) -> str:
        if v not in CELL_STATUSES:
            raise ValueError(f"unknown cell status {v!r} (specbench writes {', '.join(CELL_STATUSES)})")
        return v

    # Cells sharing a server (run/groups.py): the load this cell ran, which server and which slice of
    # its log, whether the prefix cache was reset before it, and the head variant switched in place.
    load: Optional[LoadSettings] = None
    server_group: Optional[ServerGroup] = None
    prefix_cache_reset: Optional[StrictStr] = None
    head_variant: Optional[HeadSwitch] = None
    # What the cell asked for and what vLLM said it ran (specbench/serve/attest.py); absent in older runs.
    spec: Optional[Spec] = None
    attested: Optional[Attested] = None
    # Precision-driven load (load/precision.py): why the load stopped, the half-widths reached.
    precision: Optional[Precision] = None
    # load.interleave (run/interleave.py): the baseline cell whose server this cell's load alternated
    # with, the blocks, the companion's log (or why it could not start).
    paired_baseline: Optional[PairedBaseline] = None
    # The node a remote executor (Ray) ran the cell on: the run's manifest records it in
    # cell_hosts, the cell file never does.
    node: Optional[StrictStr] = Field(default=None, exclude=True)

    def dump(self) -> dict[str, Any]:
        return ordered_dump(self)

    @property
    def k(self) -> int | None:
        """The cell's k (``spec.num_speculative_tokens``, vLLM's name); None for a baseline or a run
        from before ``spec`` was written."""
        return self.spec.num_speculative_tokens if self.spec else None


class Manifest(Part):
    """``manifest.json``: the run's identity, resolved config, machine and cell list.

    The run holds it as this model from planning on (``run.runner.RunPlan.manifest``, updated through
    ``RunPlan.note``/``save``: a key set later goes after the ones it has), store writes it, and
    readers get it from :func:`specbench.results.store.load_run` (``Run.manifest``). Keys are
    written back in the order they were read."""

    run_id: StrictStr
    specbench_version: Optional[StrictStr] = None
    vllm_version: Optional[StrictStr] = None
    config_path: Optional[StrictStr] = None
    config_sha256: Optional[StrictStr] = None
    resolved_config: Optional[dict[str, Any]] = None  # free-form: the config as the user wrote it, resolved
    axes: list[StrictStr] = Field(default_factory=list)
    machine: Optional[Machine] = None
    started_at: Optional[StrictStr] = None
    ended_at: Optional[StrictStr] = None
    status: Optional[StrictStr] = None
    cells: list[StrictStr]
    cell_hosts: dict[str, Optional[StrictStr]] = Field(default_factory=dict)
    # shared servers whose head could not be switched in place (probe's reason; a server per variant ran)
    head_switch_fallbacks: list[HeadSwitchFallback] = Field(default_factory=list)
    resumed_at: list[StrictStr] = Field(default_factory=list)
    error: Optional[StrictStr] = None  # status "failed": the error that stopped the run
    overrides: list[StrictStr] = Field(default_factory=list)  # run --set, as shown (secrets hidden)
    gate_sizing: list[StrictStr] = Field(default_factory=list)  # run --gate: why it sent the prompts it sent
    gate_subset: Optional[GateSubset] = None
    workloads: dict[str, Optional[WorkloadProvenance]] = Field(default_factory=dict)
    installs: dict[str, PreparedInstall] = Field(default_factory=dict)  # vllm axis value -> its install
    source: Optional[StrictStr] = None  # a vllm bench result or sweep read as a run (specbench/results/sweep.py)


def as_record(cls: type[R], value: "R | dict[str, Any]", file: Path | str = "record") -> R:
    """``value`` as a ``cls`` record (a dict is validated: writers get the loaders' checks too)."""
    return value if isinstance(value, cls) else cls.parse(value, file, "this is a bug in the writer")


def load(cls: type[R], path: Path, fix: str = "re-run the cell") -> R:
    """Read ``path`` (versioned JSON, :func:`specbench.io.load_json`) as a ``cls`` record."""
    return cls.parse(load_json(path), path, fix)


def diff_counts(after: Counts | None, before: Counts | None) -> Counts | None:
    """after - before; a missing 'before' (no drafts yet, counters not exported) counts as zero.

    A counter that went backwards (the server restarted between the scrapes) gives a negative
    count: kept as measured, and :func:`build_acceptance` flags it (``reset_problem``)."""
    if after is None:
        return None
    if before is None:
        return after
    pos = None
    if after.accepted_per_position is not None:
        b = before.accepted_per_position or [0] * len(after.accepted_per_position)
        pos = [x - y for x, y in zip(after.accepted_per_position, b)]
    return Counts(
        num_drafts=after.num_drafts - before.num_drafts,
        draft_tokens=after.draft_tokens - before.draft_tokens,
        accepted_tokens=after.accepted_tokens - before.accepted_tokens,
        accepted_per_position=pos,
        num_spec_tokens=after.num_spec_tokens or before.num_spec_tokens,
    )


def request_units(requests: Rows) -> list[Counts] | None:
    """One Counts per successful request with spec-decode data; None when any lacks it (plain
    rows, as a load driver returns them, are validated here; records pass through)."""
    units = []
    for req in requests_of(requests):
        if req.error:
            continue
        if req.spec_decode is None or not req.spec_decode.complete:
            return None
        units.append(req.spec_decode.counts(origin=f"request {req.id}"))
    return units or None

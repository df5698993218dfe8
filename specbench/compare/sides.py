"""One side of a comparison: a run directory or a single log / /metrics file, as matched cells.

``load_side(path)`` is the only entry point. A ``vllm bench serve`` result file or a ``vllm bench
sweep serve`` directory is read as a run (:mod:`specbench.results.sweep`). A run directory is read through
:func:`specbench.results.store.load_run` (which refuses missing, corrupt and other-version files);
cells with the same axis values (repeats) are pooled into one :class:`SideCell` whose units are
the union of the repeats' units. A log or /metrics file is one cell with axes ``{}``, named after
the file, whose units are its log windows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, TypeVar

from specbench.analysis.windows import units_k, window_k
from specbench.axis import SPEC_AXES, AxisValues, axis_label
from specbench.compare.values import check_k, check_rows
from specbench.errors import InputError
from specbench.records.attestation import not_attested
from specbench.records.cell import Attested, Spec
from specbench.records.counts import Counts, invalid_reason
from specbench.records.files import NO_SPEC_COUNTS, Acceptance, CellRecord, Manifest, acceptance_units, load
from specbench.records.requests import RequestRecord, errored, numbered_requests
from specbench.results.read import input_kind, read_run, read_windows
from specbench.results.store import CellData, summary_columns
from specbench.results.sweep import side_notes

CellKey = tuple[tuple[str, str], ...]

# latency column -> a request's (value, scale to ms) candidates, the first present taken. Our driver
# and llmperf both write *_s names (RequestRecord's fields); *_ms and llmperf's raw names are keys
# only another writer's rows carry (RequestRecord.extra).
_LATENCY: dict[str, Callable[[RequestRecord], tuple[tuple[Any, float], ...]]] = {
    "ttft_p50_ms": lambda r: ((r.extra("ttft_ms"), 1.0), (r.ttft_s, 1000.0)),
    "itl_p50_ms": lambda r: ((r.extra("itl_ms"), 1.0), (r.extra("inter_token_latency_s"), 1000.0), (r.itl_s, 1000.0)),
    "e2e_p50_ms": lambda r: ((r.extra("e2e_ms"), 1.0), (r.extra("end_to_end_latency_s"), 1000.0), (r.e2e_s, 1000.0)),
}
# summary.json (llmperf key names, read through results.store.summary_columns) fallbacks when
# there are no per-request rows.
_SUMMARY_METRICS = ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms", "output_tok_per_s")


@dataclass
class SideCell:
    key: CellKey
    name: str
    axes: AxisValues
    cell_ids: list[str] = field(default_factory=list)
    units: list[Counts] = field(default_factory=list)
    unit_kind: str | None = None  # "request" | "window" | "total" (one unit: no CI)
    latency: dict[str, list[float]] = field(default_factory=dict)  # metric -> per-request values (ms)
    latency_repeat: dict[str, list[Any]] = field(default_factory=dict)  # metric -> each value's repeat
    summary: dict[str, list[float]] = field(default_factory=dict)  # metric -> one value per repeat
    repeats: list[Any] = field(default_factory=list)  # the repeat of each finished cell pooled here
    k: int | None = None  # num_speculative_tokens, set only by side_k (the one precedence)
    is_baseline: bool = False
    requests: list[RequestRecord] = field(default_factory=list)  # requests.jsonl rows, tagged with their repeat
    # load.interleave: its baseline's requests sent interleaved with each repeat's load (tagged with
    # their repeat); None unless every repeat pooled here has them (run/interleave.py)
    paired: list[RequestRecord] | None = None
    exact: Counts | None = None  # /metrics diff summed over repeats; None unless every repeat has one
    exact_missing: bool = False  # some repeat had no /metrics diff: ``exact`` is not the cell's total
    failed_repeats: list[str] = field(default_factory=list)  # repeats of this cell that did not finish
    disagreements: list[str] = field(default_factory=list)  # repeats whose acceptance sources disagree (both figures)
    ks_seen: dict[int, str] = field(default_factory=dict)  # k of per-position counts -> where first seen
    zero_drafts: bool = False  # acceptance.json measured 0 drafts (no source showed any)
    # run directories: repeats whose cell.json lacks vLLM's confirmation of MLA, k or head variant
    # ("cell_id: mla, head_variant"), and the first repeat's attested record (confounds between runs)
    unattested: list[str] = field(default_factory=list)
    attested: Attested | None = None

    @property
    def spec_off(self) -> str:
        """Why this speculative cell ran without speculating (its load finished, every acceptance
        source it has counted 0 drafts), or ""."""
        if self.is_baseline or self.units or not self.zero_drafts:
            return ""
        done = [r for r in self.requests if not errored(r)]
        if not done:
            return ""
        tokens = sum(r.output_tokens or 0 for r in done)
        return f"0 drafts over {len(done)} finished requests ({tokens:g} output tokens)"

    def prompt_clusters(self) -> dict[str, Counts]:
        """Per-request spec-decode counts summed by prompt id (repeats and repeated prompts pooled);
        empty when any finished request lacks a prompt id or counts. A prompt whose finished
        requests made no drafts is present with zero counts (it ran: not unmatched)."""
        out: dict[str, Counts] = {}
        for row in self.requests:
            if errored(row):
                continue
            sd, pid = row.spec_decode, row.prompt_id
            if sd is None or pid is None or not sd.complete:
                return {}
            c = sd.counts()
            if invalid_reason(c):  # named in a warning where acceptance.json's units are read
                continue
            out[pid] = out[pid] + c if pid in out else c
        return out

    def sent_prompts(self) -> dict[str, bool] | None:
        """Every prompt id this cell sent, finished or not -> whether every request of it errored;
        None when some request has no prompt id (then nothing says which prompts were sent)."""
        out: dict[str, bool] = {}
        for row in self.requests:
            if row.prompt_id is None:
                return None
            out[row.prompt_id] = out.get(row.prompt_id, True) and errored(row)
        return out or None

    def prompt_texts(self) -> dict[str, str]:
        """``{prompt id: prompt_sha256}`` of the finished requests that recorded one (runs since
        workloads): the text each id stood for."""
        return {
            row.prompt_id: row.prompt_sha256
            for row in self.requests
            if not errored(row) and row.prompt_id is not None and row.prompt_sha256
        }

    def throughput_units(self) -> tuple[list[float], list[float]]:
        """(output tokens, e2e seconds) of each finished request, for throughput's standard error."""
        toks, secs = [], []
        for row in self.requests:
            t, e = row.output_tokens, _e2e(row)
            if errored(row) or not isinstance(t, (int, float)) or not isinstance(e, (int, float)) or e <= 0:
                continue
            toks.append(float(t))
            secs.append(float(e))
        return toks, secs


@dataclass
class FailedCell:
    """A cell of the study none of whose repeats finished: every gate that selects it is inconclusive."""

    key: CellKey
    name: str
    axes: AxisValues
    reason: str
    is_baseline: bool = False
    k: int | None = None  # num_speculative_tokens, set only by side_k
    spec_off: bool = False  # it failed because /metrics showed no drafts after a finished load


@dataclass
class Side:
    path: Path
    label: str
    manifest: Manifest | None
    cells: dict[CellKey, SideCell]
    skipped: list[str] = field(default_factory=list)  # cells not done, with the reason
    warnings: list[str] = field(default_factory=list)
    failed: dict[CellKey, FailedCell] = field(default_factory=dict)  # cells with no finished repeat
    contrast: str | None = None  # the axis two sides of one run differ in (compare --between; between())

    def axis_values(self) -> dict[str, set[str]]:
        """Every axis value any cell of this side has (finished or not), for checking gate selectors."""
        out: dict[str, set[str]] = {}
        for key in list(self.cells) + list(self.failed):
            for axis, value in key:
                out.setdefault(axis, set()).add(value)
        return out

    def max_k(self) -> int | None:
        """The largest k of any speculative cell; None when some speculative cell's k is unknown."""
        cells: list[SideCell | FailedCell] = [*self.cells.values(), *self.failed.values()]
        ks = [c.k for c in cells if not c.is_baseline]
        known = [k for k in ks if k]
        return max(known) if ks and len(known) == len(ks) else None


NO_SPEC_KEY = "(no speculation)"


def cell_key(axes: AxisValues) -> CellKey:
    return tuple(sorted((str(k), str(v)) for k, v in axes.items()))


def cell_name(axes: AxisValues, fallback: str) -> str:
    return ", ".join(f"{k}={v}" for k, v in axes.items()) if axes else fallback


# Inputs no specbench server produced cannot carry attestation: shown unchecked, not refused.
UNCHECKED = (
    "not attested ({what}: no specbench server reported what vLLM ran); its MLA, k and head variant are unchecked"
)


def load_side(path: Path) -> Side:
    """Read a run, one cell's acceptance.json, or one log / /metrics / ``specbench parse`` file, as
    :mod:`specbench.results.read` (report's reader too) reads it; InputError (exit 2) naming what is wrong."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such run directory or file; pass results/<run-id> or a log / /metrics file")
    kind = input_kind(path)
    if kind == "run":
        return _load_run_dir(path)
    if kind == "acceptance":
        return _load_acceptance(path)
    return _load_file(path)


def between(side: Side, axis: str, value: str) -> Side:
    """The cells of one run whose ``axis`` is ``value``, keyed without that axis, so two such
    sides of one run (``compare RUN --between vllm=0.31.0,vllm=current``) pair cell by cell as
    two runs do. Its label names the value and, for the ``vllm`` axis, the vLLM version its
    cells attested."""

    cells = _with_value(side.cells, axis, value)
    failed = _with_value(side.failed, axis, value)
    if not cells and not failed:
        have = sorted(side.axis_values().get(axis, set()))
        raise InputError(
            f"{side.path}: --between {axis}={value}: no cell has it "
            f"({'its values: ' + ', '.join(have) if have else f'the run has no {axis} axis'})"
        )
    versions = sorted({str(c.attested.vllm_version) for c in cells.values() if c.attested})
    shown = f" (vLLM {', '.join(versions)})" if axis == "vllm" and versions else ""
    return replace(
        side,
        label=f"{side.label} [{axis}={value}{shown}]",
        cells=cells,
        failed=failed,
        contrast=axis,
        skipped=[s for s in side.skipped if _of_value(s, axis, value)],
    )


_C = TypeVar("_C", SideCell, FailedCell)


def _with_value(cells: dict[CellKey, _C], axis: str, value: str) -> dict[CellKey, _C]:
    """The cells whose ``axis`` is ``value``, keyed and named without that axis."""
    out: dict[CellKey, _C] = {}
    for c in cells.values():
        if str(c.axes.get(axis)) == value:
            axes = {a: v for a, v in c.axes.items() if a != axis}
            key = cell_key(axes)
            out[key] = replace(c, key=key, axes=axes, name=cell_name(axes, c.name))
    return out


def _of_value(line: str, axis: str, value: str) -> bool:
    # a skipped cell's line starts with its cell id, where <axis label>-<value> names its value
    cell_id, label = line.split(":", 1)[0], axis_label(axis)
    return f"{label}-" not in cell_id or f"{label}-{value}_" in cell_id + "_"


def _load_acceptance(path: Path) -> Side:
    """One cell's acceptance.json: a one-cell side named after its cell directory."""
    name = path.parent.name or path.name
    cell = SideCell(key=(), name=name, axes={}, cell_ids=[name])
    side = Side(path=path, label=name, manifest=None, cells={(): cell})
    acc = load(Acceptance, path)
    if acc.baseline:
        raise InputError(f"{path}: a baseline cell (no speculation): nothing to compare; pass a speculative cell")
    measured = _add_acceptance(cell, acc, path, side.warnings)
    cell.k = side_k(cell.k, KSources(measured, acc.num_spec_tokens, units_k(cell.units)), baseline=False)
    if not cell.units:
        raise InputError(f"{path}: no spec-decode counts in this acceptance.json; pass a cell that drafted")
    side.warnings.append(f"{name}: {UNCHECKED.format(what='a lone acceptance.json')}")
    return side


def _load_file(path: Path) -> Side:
    read = read_windows([path])
    windows, warnings = [w for w in read.windows if w.num_drafts], read.warnings
    ks = sorted({window_k(w) for w in windows}, key=str)
    if len(ks) > 1:
        raise InputError(
            f"{path}: SpecDecoding windows at different k ({', '.join(f'k={k}' for k in ks)}): "
            "per-position counts cannot be pooled across k; split the log per server configuration"
        )
    if not windows:
        raise InputError(
            f"{path}: no SpecDecoding metrics with counts found; is this a vLLM server log or a "
            "/metrics scrape taken under speculative decoding?"
        )
    cell = SideCell(
        key=(),
        name=path.name,
        axes={},
        cell_ids=[path.name],
        units=read.units,
        unit_kind=read.unit,
        k=side_k(None, KSources(measured=True, counted=units_k(windows)), baseline=False),
    )
    return Side(
        path=path,
        label=path.name,
        manifest=None,
        cells={(): cell},
        warnings=[f"{path.name}: {w}" for w in [*warnings, UNCHECKED.format(what="a log or /metrics file")]],
    )


def _load_run_dir(path: Path) -> Side:
    run = read_run(path)
    if not run.cells:
        raise InputError(f"{path}: the run has no finished cells; run it (specbench run) before comparing")
    side = Side(path=path, label=str(run.manifest.run_id or path.name), manifest=run.manifest, cells={})
    # A `vllm bench sweep` directory read as a run: no specbench server ran it, so nothing could
    # attest its cells. They are shown unchecked (a warning), not refused: their numbers are vLLM's own.
    source = str(run.manifest.source or "")
    foreign = source.startswith("vllm bench")
    if foreign:
        side.warnings.append(f"{path.name}: {UNCHECKED.format(what=source + ' results')}")
    not_done: dict[CellKey, FailedCell] = {}
    for cell_id, data in run.cells.items():
        axes = _side_axes(data.record)
        key = cell_key(axes)
        if data.status != "done":
            failed = _failed_cell(key, axes, cell_id, data, run.manifest)
            side.skipped.append(failed.reason)
            not_done.setdefault(key, failed)
            continue
        _pool_cell(side, key, axes, cell_id, data, run.manifest, foreign=foreign)
    for key, failed in not_done.items():
        if key in side.cells:
            side.cells[key].failed_repeats.append(failed.reason)
        else:
            side.failed[key] = failed
    side.warnings += _timing_warnings(run)
    if str(run.manifest.source or "").startswith("vllm bench"):
        side.warnings += side_notes(run)
    return side


def _side_axes(rec: CellRecord) -> AxisValues:
    axes = dict(rec.axes)
    # A study with no speculative axis gives its baseline cells the speculative cells' axes
    # (configs/workloads.yaml): the key says which is which, or the two would pool as repeats.
    if rec.is_baseline and not set(axes) & set(SPEC_AXES):
        axes[NO_SPEC_KEY] = "baseline"
    return axes


def _failed_cell(key: CellKey, axes: AxisValues, cell_id: str, data: CellData, manifest: Manifest) -> FailedCell:
    rec = data.record
    why = f"{cell_id}: status {data.status} ({rec.reason or 'no reason given'})"
    base = bool(rec.is_baseline)
    return FailedCell(
        key,
        cell_name(axes, cell_id),
        axes,
        why,
        base,
        side_k(None, KSources(recorded=rec.k, planned=_planned_k(axes, manifest)), baseline=base),
        spec_off=not base and rec.reason == NO_SPEC_COUNTS,
    )


def _pool_cell(
    side: Side,
    key: CellKey,
    axes: AxisValues,
    cell_id: str,
    data: CellData,
    manifest: Manifest,
    *,
    foreign: bool,
) -> None:
    """Add a finished cell to the side's cell of its axis values (repeats pool into one)."""
    rec = data.record
    cell = side.cells.get(key)
    if cell is None:
        cell = side.cells[key] = SideCell(
            key=key, name=cell_name(axes, cell_id), axes=axes, is_baseline=bool(rec.is_baseline)
        )
    cell.cell_ids.append(cell_id)
    cell.repeats.append(rec.repeat)
    if not foreign:
        _add_attestation(cell, cell_id, rec)
    measured = _add_acceptance(cell, data.acc, data.dir / "acceptance.json", side.warnings)
    _add_latency(cell, *data.request_rows(), data.summary, rec.repeat)
    paired = data.paired_baseline_records() if not cell.is_baseline else None
    cell.paired = (cell.paired or []) + paired if paired and (cell.paired or len(cell.repeats) == 1) else None
    measured_at = data.acc.num_spec_tokens if data.acc is not None else None
    sources = KSources(measured, measured_at, units_k(cell.units), rec.k, _planned_k(axes, manifest))
    cell.k = side_k(cell.k, sources, baseline=cell.is_baseline)


def _timing_warnings(run) -> list[str]:
    """Latency and speed-up compare client timings: say when this run's cells did not run alone on
    one machine (the Ray executor can run them side by side, or on different hosts)."""
    hosts = run.manifest.cell_hosts
    spans = [
        (cid, hosts.get(cid) or "", c.record.started_at, c.record.ended_at)
        for cid, c in run.cells.items()
        if c.status == "done"
    ]
    spans = [s for s in spans if isinstance(s[2], str) and isinstance(s[3], str) and s[2] and s[3]]  # damaged: no span
    together = sorted(
        {
            f"{a[0]} + {b[0]}"
            for i, a in enumerate(spans)
            for b in spans[i + 1 :]
            if a[1] == b[1] and a[2] < b[3] and b[2] < a[3]
        }
    )  # ISO UTC strings order as times
    out = []
    if together:
        out.append(
            f"cells ran at the same time on one host ({'; '.join(together)}): their latency and "
            "speed-up figures include each other's load"
        )
    if len({h for h in hosts.values() if h}) > 1:
        out.append("cells ran on different hosts: latency and speed-up figures include hardware differences")
    return out


def _units(acc: Acceptance, where: Path, warnings: list[str] | None = None) -> tuple[list[Counts], str | None]:
    """The cell's CI units as report reads them too (records.files.acceptance_units); invalid ones warned of."""
    units, kind, left_out = acceptance_units(acc, where)
    if warnings is not None:
        warnings += left_out
    return units, kind


def _add_attestation(cell: SideCell, cell_id: str, rec) -> None:
    """What vLLM confirmed of this repeat's claim: MLA for every cell; k and the head variant for a
    speculative one (a run from before attestation confirms nothing)."""
    fields: tuple[str, ...] = ("mla",) if rec.is_baseline else ("mla", "num_speculative_tokens", "head_variant")
    attested = rec.attested
    spec = rec.spec or Spec()
    if attested is not None and not rec.is_baseline and spec.head_variant is None:
        fields = ("mla", "num_speculative_tokens")  # a method without a DeepSeek head: no variant to confirm
    if attested is not None and spec.mla is None and attested.mla is None:
        fields = tuple(f for f in fields if f != "mla")  # MLA neither asked nor reported (a model without MLA)
    missing = not_attested(attested, fields)
    if missing:
        cell.unattested.append(f"{cell_id}: {', '.join(missing)}")
    if cell.attested is None:
        cell.attested = attested


def _add_acceptance(cell: SideCell, acc: Acceptance | None, where: Path, warnings: list[str]) -> bool:
    """Pool one repeat's acceptance.json into the cell; whether it brought counts that drafted
    (its k then comes from them: :func:`side_k`)."""
    if acc is None or acc.baseline:
        return False
    clash = _disagreement(acc)
    if clash:
        cell.disagreements.append(f"{where.parent.name}: {clash}")
    units, kind = _units(acc, where, warnings)
    if not units:
        cell.zero_drafts = cell.zero_drafts or _measured_zero(acc)
        return False
    prev = cell.unit_kind
    exact = _exact(acc)
    if exact is None or cell.exact_missing:
        cell.exact, cell.exact_missing = None, True
    else:
        cell.exact = exact if cell.exact is None else cell.exact + exact
    cell.units.extend(units)
    for i, u in enumerate(units):
        if u.accepted_per_position is not None:
            cell.ks_seen.setdefault(len(u.accepted_per_position), f"{where} ({kind} unit {i})")
    check_k(cell.ks_seen, cell.name)
    if not clash:
        _check_own_totals(acc, where)
    if kind == "total" and len(cell.units) > 1:
        kind = "repeat"  # one exact total per repeat: the repeats are the units
    if prev not in (None, "total", kind):
        warnings.append(f"{cell.name}: repeats have different units ({prev}, {kind}); pooled anyway")
    cell.unit_kind = kind
    return True


def _check_own_totals(acc: Acceptance, where: Path) -> None:
    """InputError when acceptance.json's /metrics counts contradict the sum of its own per-request
    units while the file does not record them as disagreeing: a damaged file (num_drafts 2000 over
    units that add up to 461 read as a regression), never a verdict."""
    prom = acc.prometheus.counts
    req = list(acc.per_request.units) if acc.per_request is not None else []
    if prom is None or not req or invalid_reason(prom) or any(invalid_reason(u) for u in req):
        return
    drafts, accepted = sum(u.num_drafts for u in req), sum(u.accepted_tokens for u in req)
    if (drafts, accepted) != (prom.num_drafts, prom.accepted_tokens):
        raise InputError(
            f"{where}: its /metrics counts ({prom.num_drafts} drafts, {prom.accepted_tokens} accepted) contradict "
            f"the sum of its own per-request units ({drafts} drafts, {accepted} accepted), and it does not record "
            "them as disagreeing: the file is damaged; re-run the cell"
        )


def _measured_zero(acc: Acceptance) -> bool:
    """A source of acceptance.json counted drafts and found none (not: nothing was recorded)."""
    prom = acc.total
    req = list(acc.per_request.units) if acc.per_request is not None else []
    return (prom is not None and prom.num_drafts == 0 and not invalid_reason(prom)) or (
        bool(req) and all(u.num_drafts == 0 for u in req)
    )


def _disagreement(acc: Acceptance) -> str:
    """Both figures when acceptance.json records that the per-request counts and the /metrics diff
    disagree (counts_equal: exact integers, so any difference is beyond rounding), else ""."""
    if acc.agreement.per_request_vs_prometheus is not False:
        return ""
    req = acc.per_request.counts if acc.per_request is not None else None
    prom = acc.prometheus.counts

    def show(c) -> str:
        if c is None:
            return "none"
        al = f"AL {1 + c.accepted_tokens / c.num_drafts:.4g}, " if c.num_drafts else ""
        return f"{al}{c.num_drafts} drafts, {c.accepted_tokens} accepted tokens, per position {c.accepted_per_position}"

    return f"per-request counts {show(req)}; /metrics {show(prom)}"


def _exact(acc: Acceptance) -> Counts | None:
    c = acc.total
    if c is None or not c.num_drafts or invalid_reason(c):  # invalid: _units warned about it
        return None
    return c


@dataclass(frozen=True)
class KSources:
    """What can tell a side cell's k (num_speculative_tokens) as one repeat, acceptance.json or
    log is pooled into it, for :func:`side_k`."""

    measured: bool = False  # it brought counts that drafted (a log's windows, acceptance.json's units)
    measured_at: int | None = None  # acceptance.json's num_spec_tokens: the k the run wrote beside its counts
    counted: int | None = None  # what vLLM counted: the one k all the units show (units_k)
    recorded: int | None = None  # cell.json's spec.num_speculative_tokens (CellRecord.k): the k the cell asked for
    planned: int | None = None  # a run from before cell.json had spec: the k axis, else the study's (_planned_k)


def side_k(known: int | None, src: KSources, *, baseline: bool) -> int | None:
    """A side cell's k once ``src`` is pooled into it (``known``: its k so far): the one place
    compare works k out; :attr:`SideCell.k` and :attr:`FailedCell.k` hold only what it returns.

    The counts come first. A repeat whose counts drafted sets k to acceptance.json's
    ``num_spec_tokens`` (the cell's planned k, which the run wrote beside the counts it collected:
    run/measure.py), else to the one k that every unit pooled so far shows (what vLLM counted: each
    unit's ``num_spec_tokens`` as vLLM logged it, else its number of per-position counts); of
    several such repeats the last one's stands (repeats of a cell share k: ``values.check_k``
    refuses counts of two). A repeat that measured nothing keeps ``known``. A speculative cell
    still without a k then takes what was planned: cell.json's ``spec.num_speculative_tokens`` (the
    k its server was asked for), else, for a run from before ``spec`` was written, its
    ``num_speculative_tokens`` axis or the study's static k. A baseline cell gets a k only from
    counts (it has none). What vLLM attested is no source: a k it did not confirm is a warning
    (:attr:`SideCell.unattested`), never another k."""
    k = (src.measured_at or src.counted) if src.measured else known
    if k is None and not baseline:
        k = src.recorded or src.planned
    return k


def _planned_k(axes: AxisValues, manifest: Manifest) -> int | None:
    """k a cell was to run with, for a run from before cell.json had ``spec``: its
    num_speculative_tokens axis, else the study's setting."""
    k = axes.get("num_speculative_tokens")
    if k is None:
        spec = ((manifest.resolved_config or {}).get("serve") or {}).get("speculative") or {}
        k = spec.get("num_speculative_tokens")
    if k is None:
        return None
    try:
        return int(k)
    except (TypeError, ValueError):
        return None


def _e2e(row: RequestRecord) -> Any:
    # e2e_s when the row has the key (even as null), else llmperf's name for it
    return row.e2e_s if "e2e_s" in row.model_fields_set else row.extra("end_to_end_latency_s")


def _add_latency(
    cell: SideCell,
    numbered: list[tuple[int, dict[str, Any]]],
    where: str,
    summary: dict[str, Any] | None,
    repeat: Any = None,
) -> None:
    """The repeat's requests: their values checked as written (compare/values.py), then validated
    once as records (each tagged with the repeat) and their latencies taken."""
    for k, line in check_rows(numbered, where).items():
        cell.ks_seen.setdefault(k, f"{where}:{line}")
    check_k(cell.ks_seen, cell.name)
    for row in numbered_requests(numbered, where, repeat):
        cell.requests.append(row)
        if errored(row):
            continue
        for metric, candidates in _LATENCY.items():
            value = next((v * s for x, s in candidates(row) if (v := _per_request(x)) is not None), None)
            if value is not None:
                cell.latency.setdefault(metric, []).append(float(value))
                cell.latency_repeat.setdefault(metric, []).append(repeat)
    columns = summary_columns(summary)
    for metric in _SUMMARY_METRICS:
        value = columns.get(metric)
        if isinstance(value, (int, float)):
            cell.summary.setdefault(metric, []).append(float(value))


def _per_request(value: Any) -> float | None:
    # Our driver stores each request's inter-token gaps as a list; llmperf a per-request mean.
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list) and value and all(isinstance(x, (int, float)) for x in value):
        return sum(value) / len(value)
    return None

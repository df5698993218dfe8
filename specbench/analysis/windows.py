"""Canonical records -> per-window :class:`Counts` (the summable unit), with every derivation labelled.

- vLLM V1 lines cover one logging interval each: one Counts per line.
- vLLM V0 lines are cumulative since start: consecutive lines of one (file, pid, engine) stream are
  differenced; a counter that goes down means the server restarted, which starts a new stream.
- Prometheus scrapes are exact cumulative counters: each scrape (file) is summed over its series
  (engines), and consecutive scrapes are differenced in the order given (a before/after pair gives
  the load's counts); a lone scrape gives the counts since server start. A counter that goes down
  between scrapes (the server restarted: a counter reset) is refused (InputError naming the file
  and the series): the difference would be a plausible-looking wrong number.
- Counts that cannot be real (negative, accepted > drafted, p_i > 1) are left out with a warning
  naming file:line. Windows of different k are reported (per-position counts do not sum across k).
- Lines that print rates but no counts (SGLang's ``accept len``) cannot be summed; they are left
  out of the counts with a warning, and :func:`rate_only_summary` reports them on their own.

Where a line does not print ``num_drafts`` D it is derived: ``D = draft_tokens / k`` when every
draft has full length k, cross-checked with ``accepted_tokens / sum(p_i)`` from the printed
per-position rates (which also gives D when drafts were shorter). Per-position counts are
reconstructed as ``round(p_i * D)`` and marked ``derived``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from specbench.analysis.rates import acceptance
from specbench.errors import InputError
from specbench.metrics.record import SpecDecodeRecord
from specbench.records.counts import Counts, invalid_reason

# Half a unit in the last printed digit of vLLM's formats: AL "%.2f", rates "%.3f", DAR "%.1f%%".
AL_PRINT_TOL = 0.005 + 1e-9
RATE_PRINT_TOL = 0.0005 + 1e-9


def _where(rec: SpecDecodeRecord) -> str:
    if rec.file is None and rec.line is None:
        return f"{rec.source} record"
    return f"{rec.file or '<text>'}:{rec.line if rec.line is not None else '?'}"


def _spec_tokens(rec: SpecDecodeRecord) -> int | None:
    if rec.num_spec_tokens:
        return rec.num_spec_tokens
    for lst in (rec.accepted_per_position, rec.per_position_acceptance):
        if lst:
            return len(lst)
    return None


def has_counts(rec: SpecDecodeRecord) -> bool:
    """True when the record carries the token counts needed to sum it with others."""
    return rec.accepted_tokens is not None and rec.draft_tokens is not None


def _derive_drafts(rec: SpecDecodeRecord, warnings: list[str]) -> tuple[int, bool] | None:
    """(num_drafts, derived?) for a record with counts, or None when D cannot be known.

    Drafts carry at most k tokens, so D >= drafted/k, with equality for full-length drafts (the
    assumption vLLM's own D = drafted/k makes). The printed rates bound D independently:
    accepted / (sum(p_i) +- rounding). Where both agree, drafted/k is used; where they disagree,
    the rates win; where neither pins D down, the line is flagged as approximate.
    """
    if rec.num_drafts is not None:
        return rec.num_drafts, False
    a, t, k, where = rec.accepted_tokens, rec.draft_tokens, _spec_tokens(rec), _where(rec)
    assert a is not None and t is not None
    if k is None:
        warnings.append(
            f"{where}: cannot derive num_drafts (k, num_spec_tokens, is unknown); line left out of the counts"
        )
        return None
    d_min = -(-t // k)  # ceil(t / k)
    rates = rec.per_position_acceptance
    lo, hi = float(d_min), math.inf
    if rates and a > 0:
        s, slack = sum(rates), len(rates) * RATE_PRINT_TOL
        lo, hi = max(lo, a / (s + slack)), (a / (s - slack) if s > slack else math.inf)
    if t % k == 0:
        d_k = t // k
        if lo <= d_k <= hi:
            return d_k, True
        if d_k > hi:
            warnings.append(
                f"{where}: drafted/k = {d_k} drafts but accepted/sum(p_i) allows at most {hi:.1f}; "
                "the line is inconsistent, using drafted/k"
            )
            return d_k, True
        warnings.append(
            f"{where}: drafted/k = {d_k} disagrees with accepted/sum(p_i) >= {lo:.1f} beyond rounding; "
            "drafts were not all full length, using the per-position rates"
        )
    ints = range(math.ceil(lo), math.floor(hi) + 1) if hi != math.inf else None
    if ints is not None and len(ints) == 1:
        return ints[0], True
    if ints is not None and len(ints) == 0:
        d = math.ceil(lo)
        warnings.append(
            f"{where}: drafted {t} needs at least {d_min} drafts of k={k} but accepted/sum(p_i) allows at most "
            f"{hi:.1f}; the line is inconsistent, using {d}, statistics from this line are approximate"
        )
        return d, True
    if rates and a > 0 and sum(rates) > 0:
        d = min(max(round(a / sum(rates)), math.ceil(lo)), math.floor(hi) if hi != math.inf else 2**62)
    else:
        d = math.ceil(lo)
    top = "unbounded" if hi == math.inf else f"{hi:.1f}"
    warnings.append(
        f"{where}: num_drafts not printed, drafts not all full length, and the printed rates only bound it to "
        f"[{lo:.1f}, {top}]; using {d}, statistics from this line are approximate"
    )
    return d, True


def _record_counts(rec: SpecDecodeRecord, warnings: list[str]) -> Counts | None:
    got = _derive_drafts(rec, warnings)
    if got is None:
        return None
    d, d_derived = got
    derived: list[str] = ["num_drafts"] if d_derived else []
    pos = rec.accepted_per_position
    if pos is None and rec.per_position_acceptance is not None:
        pos = [round(p * d) for p in rec.per_position_acceptance]
        derived.append("accepted_per_position")
    k = rec.num_spec_tokens or _spec_tokens(rec)
    return Counts(
        num_drafts=d,
        draft_tokens=rec.draft_tokens,  # type: ignore[arg-type]
        accepted_tokens=rec.accepted_tokens,  # type: ignore[arg-type]
        accepted_per_position=list(pos) if pos is not None else None,
        num_spec_tokens=k,
        derived=tuple(derived),
        origin=_where(rec),
        time=rec.time,
    )


def check_printed(rec: SpecDecodeRecord, c: Counts) -> list[str]:
    """Compare what a line printed with what its counts give (the line's own window)."""
    out: list[str] = []
    acc = acceptance(c)
    where = _where(rec)
    if rec.mean_acceptance_length is not None and c.num_drafts:
        printed, recomputed = rec.mean_acceptance_length, acc.mean_acceptance_length
        tol = AL_PRINT_TOL
        if "num_drafts" in c.derived:  # a derived D may be off by one when only bounded by rates
            tol += c.accepted_tokens / c.num_drafts - c.accepted_tokens / (c.num_drafts + 1)
        if abs(printed - recomputed) > tol:
            if abs(printed - (recomputed - 1)) <= tol:
                out.append(
                    f"{where}: printed mean acceptance length {printed} excludes the bonus token "
                    "(vLLM before 2025-05-09); specbench's AL = 1 + A/D includes it"
                )
            else:
                out.append(f"{where}: printed mean acceptance length {printed} != recomputed {recomputed:.4f}")
    if rec.draft_acceptance_rate is not None and c.draft_tokens:
        if abs(rec.draft_acceptance_rate - acc.draft_acceptance_rate) > RATE_PRINT_TOL:
            out.append(
                f"{where}: printed draft acceptance rate {rec.draft_acceptance_rate} != "
                f"accepted/drafted {acc.draft_acceptance_rate:.4f}"
            )
    if rec.per_position_acceptance and rec.accepted_per_position and c.num_drafts:
        for i, (printed, exact) in enumerate(zip(rec.per_position_acceptance, acc.per_position)):
            if abs(printed - exact) > RATE_PRINT_TOL:
                out.append(f"{where}: printed p_{i} {printed} != recomputed {exact:.4f}")
                break
    if rec.emitted_tokens is not None and rec.accepted_tokens is not None and "num_drafts" in c.derived:
        # V0: every verify step emits its accepted tokens plus one (recovered or bonus) token.
        if rec.emitted_tokens - rec.accepted_tokens != c.num_drafts:
            out.append(
                f"{where}: emitted - accepted = {rec.emitted_tokens - rec.accepted_tokens} "
                f"!= derived num_drafts {c.num_drafts}"
            )
    return out


def _minus(after: Counts, before: Counts) -> Counts | None:
    """after - before, or None when a counter went down (a restart)."""
    pairs = [
        (after.num_drafts, before.num_drafts),
        (after.draft_tokens, before.draft_tokens),
        (after.accepted_tokens, before.accepted_tokens),
    ]
    pos = None
    if after.accepted_per_position is not None and before.accepted_per_position is not None:
        if len(after.accepted_per_position) == len(before.accepted_per_position):
            pairs += list(zip(after.accepted_per_position, before.accepted_per_position))
            pos = [x - y for x, y in zip(after.accepted_per_position, before.accepted_per_position)]
    if any(x < y for x, y in pairs):
        return None
    return Counts(
        num_drafts=after.num_drafts - before.num_drafts,
        draft_tokens=after.draft_tokens - before.draft_tokens,
        accepted_tokens=after.accepted_tokens - before.accepted_tokens,
        accepted_per_position=pos,
        num_spec_tokens=after.num_spec_tokens,
        derived=tuple(dict.fromkeys(after.derived + before.derived)),
        origin=f"{after.origin} - {before.origin}",
        time=after.time,
    )


def _stream_key(rec: SpecDecodeRecord) -> tuple[Any, ...]:
    if rec.source == "prometheus":
        return ("prometheus", rec.engine)
    return (rec.file, rec.pid, rec.engine)


def _spec_records(records: Iterable[Any]) -> list[SpecDecodeRecord]:
    return [r for r in records if isinstance(r, SpecDecodeRecord)]


_PROM_NAMES = {
    "num_drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
}


def _reset(after: Counts, before: Counts) -> str | None:
    """The counter that went down from ``before`` to ``after``, as ``series before -> after``, or None."""
    for name, metric in _PROM_NAMES.items():
        a, b = getattr(after, name), getattr(before, name)
        if a < b:
            return f"{metric} {b} -> {a}"
    pa, pb = after.accepted_per_position, before.accepted_per_position
    if pa is not None and pb is not None:
        for i, (a, b) in enumerate(zip(pa, pb)):
            if a < b:
                return f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {b} -> {a}'
    return None


def _scrape_totals(spec: list[SpecDecodeRecord], warnings: list[str]) -> list[tuple[str, list[tuple[Any, Counts]]]]:
    """Prometheus records grouped by scrape (file), in order: [(file, [(engine, counts), ...])]."""
    scrapes: dict[Any, list[tuple[Any, Counts]]] = {}
    for rec in spec:
        if rec.source != "prometheus" or not has_counts(rec):
            continue
        c = _record_counts(rec, warnings)
        if c is not None:
            scrapes.setdefault(rec.file, []).append((rec.engine, c))
    return [(str(f) if f is not None else "<scrape>", series) for f, series in scrapes.items()]


def _sum(counts: list[Counts]) -> Counts:
    out = counts[0]
    for c in counts[1:]:
        out = out + c
    return out


def _prometheus_windows(spec: list[SpecDecodeRecord], warnings: list[str]) -> list[Counts]:
    scrapes = _scrape_totals(spec, warnings)
    out: list[Counts] = []
    for i, (file, series) in enumerate(scrapes):
        total = _sum([c for _, c in series])
        total.origin = file
        if i == 0:
            if len(scrapes) == 1:  # a lone scrape: counts since the server started
                out.append(total)
            continue
        prev_file, prev = scrapes[i - 1]
        prev_by_engine = dict(prev) if len({e for e, _ in prev}) == len(prev) else {}
        by_engine = dict(series) if len({e for e, _ in series}) == len(series) else {}
        checks = [(f"engine={e} ", by_engine[e], prev_by_engine[e]) for e in by_engine if e in prev_by_engine]
        checks.append(("", total, _sum([c for _, c in prev])))
        for label, after, before in checks:
            went = _reset(after, before)
            if went:
                raise InputError(
                    f"{file}: counter {label}{went} went down since {prev_file}: the server restarted "
                    "between the scrapes (a counter reset), so their difference is not the traffic in "
                    "between; take both scrapes from one server run"
                )
        diff = _minus(total, _sum([c for _, c in prev]))
        if diff is not None and (diff.num_drafts or diff.draft_tokens):
            out.append(diff)
    return out


def counts_from_records(records: Iterable[Any]) -> tuple[list[Counts], list[str]]:
    """One :class:`Counts` per window (in input order), and warnings. See the module docstring.

    InputError when a Prometheus counter goes down between two scrapes (a counter reset)."""
    counter = WindowCounter()
    for rec in records:
        counter.add(rec)
    return counter.finish()


class WindowCounter:
    """:func:`counts_from_records` fed one record at a time, so that a long log's records are
    turned into windows as they are read and never held together (``report`` on a log)."""

    def __init__(self) -> None:
        self.windows: list[Counts] = []
        self.rate_only: list[SpecDecodeRecord] = []  # lines with rates but no counts, in order
        self._warnings: list[str] = []
        self._prometheus: list[SpecDecodeRecord] = []  # scrapes: differenced at the end, in order
        self._last: dict[tuple[Any, ...], Counts] = {}

    def add(self, rec: Any) -> None:
        if not isinstance(rec, SpecDecodeRecord):
            return
        positions = rec.accepted_per_position or rec.per_position_acceptance
        if rec.num_spec_tokens == 0 and positions:
            # k = 0 is a run without speculation: per-position values there are a damaged record,
            # and reading k from them instead (as a missing k is) would hide that.
            raise InputError(
                f"{_where(rec)}: num_spec_tokens is 0 but the record has {len(positions)} per-position "
                "value(s); fix num_spec_tokens (the k the server ran) or drop the per-position values"
            )
        if not has_counts(rec):
            self.rate_only.append(rec)
            return
        if rec.source == "prometheus":
            self._prometheus.append(rec)
            return
        warnings = self._warnings
        c = _record_counts(rec, warnings)
        if c is None:
            return
        bad = invalid_reason(c)
        if bad:
            warnings.append(f"{_where(rec)}: invalid counts ({bad}); line left out of the counts")
            return
        if not rec.cumulative:
            warnings.extend(check_printed(rec, c))
            self.windows.append(c)
            return
        key = _stream_key(rec)
        prev = self._last.get(key)
        self._last[key] = c
        warnings.extend(check_printed(rec, c))  # a cumulative line's printed rates cover since-start
        if prev is None:
            self.windows.append(c)
            return
        diff = _minus(c, prev)
        if diff is None:
            warnings.append(f"{_where(rec)}: cumulative counters went down (server restart?); starting a new stream")
            self.windows.append(c)
        elif diff.num_drafts or diff.draft_tokens:
            self.windows.append(diff)

    def finish(self) -> tuple[list[Counts], list[str]]:
        """The windows and warnings :func:`counts_from_records` gives for the records added."""
        warnings: list[str] = []
        if self.rate_only:
            files = sorted({str(r.file) for r in self.rate_only})
            warnings.append(
                f"{len(self.rate_only)} record(s) in {', '.join(files)} print rates but no token counts "
                f"(formats: {', '.join(sorted({r.format for r in self.rate_only}))}); they cannot be summed "
                "and are reported separately as rate-only, not averaged"
            )
        warnings += self._warnings
        windows = self.windows
        for c in _prometheus_windows(self._prometheus, warnings):
            bad = invalid_reason(c)
            if bad:
                warnings.append(f"{c.origin}: invalid counts ({bad}); left out of the counts")
            else:
                windows.append(c)
        warnings.extend(mixed_k(windows))
        return windows, warnings


def window_k(c: Counts) -> int | None:
    """k of one unit of counts: as recorded, else the length of its per-position counts."""
    return c.num_spec_tokens or (len(c.accepted_per_position) if c.accepted_per_position else None)


def units_k(units: list[Counts]) -> int | None:
    """The one k all ``units`` share (:func:`window_k`); None when they have none or several."""
    ks = {window_k(u) for u in units}
    return ks.pop() if len(ks) == 1 else None


def mixed_k(windows: list[Counts]) -> list[str]:
    """A warning when windows were measured at different k (their per-position counts do not sum)."""
    by_k: dict[Any, list[Counts]] = {}
    for w in windows:
        by_k.setdefault(window_k(w), []).append(w)
    if len(by_k) < 2:
        return []
    parts = "; ".join(
        f"k={k}: {len(ws)} window(s), {sum(w.num_drafts for w in ws)} drafts, first at {ws[0].origin or '?'}"
        for k, ws in sorted(by_k.items(), key=lambda kv: str(kv[0]))
    )
    return [
        f"windows measured at different k ({parts}): per-position counts cannot be summed across k; "
        "analyse each k apart (one log per server configuration)"
    ]


class PrintedRates(TypedDict):
    """One rate-only line's figures as it printed them (None where it printed none)."""

    origin: str
    time: str | None
    mean_acceptance_length: float | None
    draft_acceptance_rate: float | None
    per_position_acceptance: list[float] | None
    num_drafts: int | None


@dataclass
class RateOnlySummary:
    """Lines that print rates without counts, kept apart from summed counts."""

    n_records: int
    weighted: bool  # True when every line printed num_drafts, so AL could be combined exactly
    mean_acceptance_length: float | None  # draft-weighted AL when ``weighted``, else None
    per_record: list[PrintedRates] = field(default_factory=list)  # one per line
    note: str = ""


def rate_only_summary(records: Iterable[Any]) -> RateOnlySummary | None:
    """Summarise rate-only records without averaging rates across lines; None if there are none."""
    rows = [r for r in _spec_records(records) if not has_counts(r)]
    if not rows:
        return None
    per: list[PrintedRates] = [
        {
            "origin": _where(r),
            "time": r.time,
            "mean_acceptance_length": r.mean_acceptance_length,
            "draft_acceptance_rate": r.draft_acceptance_rate,
            "per_position_acceptance": r.per_position_acceptance,
            "num_drafts": r.num_drafts,
        }
        for r in rows
    ]
    with_al = [r for r in rows if r.mean_acceptance_length is not None]
    weights = [
        (r.num_drafts, r.mean_acceptance_length)
        for r in with_al
        if r.num_drafts and r.mean_acceptance_length is not None
    ]
    if with_al and len(weights) == len(with_al):
        d = sum(n for n, _ in weights)
        al = 1 + sum(n * (m - 1) for n, m in weights) / d
        return RateOnlySummary(len(rows), True, al, per, "AL combined weighted by num_drafts (exact)")
    return RateOnlySummary(
        len(rows), False, None, per, "no draft counts printed: values are per line as printed, not combined"
    )

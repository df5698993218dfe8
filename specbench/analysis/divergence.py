"""Where the greedy outputs of two cells differ, and acceptance over the part they share.

Some axes change the target's own text, not only the draft: MLA on/off changes numerics, and in
bf16 even speculation on/off flips near-ties. An acceptance difference between two such cells mixes
"the draft got worse" with "the workload changed". This module pairs the two cells' requests,
finds each pair's first divergence, and recomputes acceptance over the verify steps that lie
wholly inside the common prefix, where both cells faced the same target text.

Pairing: the load driver sends prompts in a seeded order, so request ``id`` i of two cells of one
run carries the same prompt; pairs are matched by ``(repeat, id)`` and a pair whose ``prompt_id``
differs is refused (counted in ``mismatched``, never compared). Failed requests are left out.

First divergence (token positions, 0-based, over ``token_ids``; over ``text`` characters when a
row has no token ids): the first index where the sequences differ. When one is a strict prefix of
the other (one stopped early, e.g. at EOS), they diverge at the shorter length. Equal sequences are
identical even when both were cut at ``max_tokens``: what either would have generated after the cut
is unknown, so it is not a divergence.

Prefix AL (needs ``--per-request-spec-decode-metrics detailed``, whose ``per_step_accepted`` /
``per_step_drafted`` arrays list every verify step in order): token 0 comes from prefill; verify
step s starts at token ``pos_s`` (``pos_0 = 1``) and emits ``accepted_s + 1`` tokens (the
bonus/correction token included), the last step clipped at the output's end. **A step counts when
it starts inside the common prefix** (``pos_s < prefix``: its first verified token is one both
cells' targets produced); all steps count for an identical pair.

Prefix AL is its own quantity, not an estimate of a cell's AL: shown in a table of its own, never
beside plain AL. Two reasons:

* It covers the **early output** only: with prefixes of a few tokens it is the acceptance of the
  first verify steps, which can differ from the whole output's (committed default study, MLA on,
  norm on: a request's first verify step accepts 1.05 tokens on average, all steps 1.72).
* It estimates the per-step acceptance without bias only when **verify steps are independent**:
  then the rule above is a stopping rule (whether a step counts depends only on the steps before
  it) and Wald's identity makes ``Σ accepted / Σ steps`` unbiased. When acceptance is "sticky"
  (a long step makes the next long step likelier), the steps that start inside a short prefix
  over-represent the request's first runs and the figure departs from the long-run AL
  (tests/analysis/test_divergence.py: 2.60 against the same requests' plain 2.68).

What it is for: comparing two cells **on the same positions** — both sides count the steps that
start inside the same prefix of the same prompts, so the difference B - A measures the drafts on
text both targets produced. (Keeping only steps that *end* inside the prefix would be worse: a
step that accepted more is longer, so more likely to straddle the divergence; with i.i.d. steps
and prefixes of median ~7 tokens it reads a true 2.70 as 2.53.)

A request whose steps do not account for its tokens (``1 + Σ(accepted+1) - len`` outside
``[0, k]``) is left out of the prefix AL and counted in ``unaligned``.

CIs (:func:`common_prefix_intervals`): each side's prefix AL and the difference B - A, by
a percentile bootstrap that resamples prompts (clusters: all requests of one prompt id, across
repeats, move together) and keeps each prompt's two sides together (paired), summing counts
before dividing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specbench.analysis.intervals import percentile_interval, resample_weights
from specbench.records.counts import Counts
from specbench.records.requests import RequestRecord, Rows, SpecDecode, requests_of

COMMON_PREFIX_DEFINITION = (
    "prefix AL: 1 + A/D over only the verify steps that start inside the prefix both cells' outputs share, "
    "the same steps' positions on both sides. It is not a cell's AL: it covers the early output only, and "
    "equals the per-step acceptance only when verify steps are independent; compare a prefix AL only with "
    "the other cell's prefix AL"
)


def first_divergence(a: Any, b: Any) -> int | None:
    """First index where sequences ``a`` and ``b`` differ; None when they are equal."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return None if len(a) == len(b) else n


def output_of(row: RequestRecord) -> tuple[Any, str] | None:
    """A request's output as (sequence, unit): token ids, else its text; None for failed requests."""
    if not row.ok:
        return None
    if row.token_ids:
        return list(row.token_ids), "token"
    if row.text:
        return row.text, "char"
    return None


def step_counts(spec: SpecDecode | None, n_tokens: int, prefix: int | None) -> Counts | None:
    """Counts over the verify steps that start inside ``[0, prefix)`` (None = all steps).

    ``spec`` is a request's ``spec_decode``; None when it has no per-step arrays or its steps do
    not account for its ``n_tokens`` (see the module docstring).
    """
    if spec is None or spec.per_step_accepted is None:
        return None
    acc, drafted = list(spec.per_step_accepted), list(spec.per_step_drafted or [])
    k = int(spec.num_spec_tokens or max(drafted or [0]))
    if len(drafted) != len(acc) or not 0 <= 1 + sum(a + 1 for a in acc) - n_tokens <= k:
        return None
    pos, d, t, a_sum, per_pos = 1, 0, 0, 0, [0] * k
    for a, dr in zip(acc, drafted):
        if prefix is not None and pos >= prefix:
            break
        d, t, a_sum = d + 1, t + dr, a_sum + a
        for i in range(min(a, k)):
            per_pos[i] += 1
        pos += a + 1
    return Counts(
        num_drafts=d,
        draft_tokens=t,
        accepted_tokens=a_sum,
        accepted_per_position=per_pos,
        num_spec_tokens=k,
        origin="common prefix",
    )


def plain_counts(spec: SpecDecode | None) -> Counts | None:
    """A request's own counts (the whole output), from its ``spec_decode``; None without one (or
    an empty one); ValueError when its counts are incomplete."""
    if spec is None or not (spec.model_fields_set or spec.model_extra):
        return None
    return spec.counts()


@dataclass
class PromptPair:
    """One prompt's two outputs: ``position`` None when identical."""

    repeat: int | None
    id: int
    prompt_id: str
    position: int | None
    len_a: int
    len_b: int
    common_a: Counts | None = None  # this prompt's common-prefix counts on each side (None: no per-step data)
    common_b: Counts | None = None


@dataclass
class SideAcceptance:
    """One cell's acceptance over the paired requests: whole outputs and common prefix only.

    ``plain`` and ``common`` are per-request units (lists, for the bootstrap); ``common`` is empty
    when the cell has no per-step arrays (summary-level data).
    """

    plain: list[Counts] = field(default_factory=list)
    common: list[Counts] = field(default_factory=list)
    unaligned: int = 0


@dataclass
class PairDivergence:
    """Divergence between cells ``a`` and ``b`` (labels), over their paired requests."""

    a: str
    b: str
    unit: str  # "token" | "char"
    prompts: list[PromptPair]
    mismatched: int = 0  # pairs refused: same request id, different prompt
    unpaired: int = 0  # requests without a partner (failed, missing)
    acc_a: SideAcceptance = field(default_factory=SideAcceptance)
    acc_b: SideAcceptance = field(default_factory=SideAcceptance)

    @property
    def n(self) -> int:
        return len(self.prompts)

    @property
    def identical(self) -> int:
        return sum(1 for p in self.prompts if p.position is None)

    @property
    def identical_share(self) -> float:
        return self.identical / self.n if self.n else float("nan")

    @property
    def divergence_share(self) -> float:
        return 1 - self.identical_share

    @property
    def positions(self) -> list[int]:
        """First-divergence positions of the prompts that diverge."""
        return [p.position for p in self.prompts if p.position is not None]

    def warnings(self) -> list[str]:
        out = []
        if self.mismatched:
            out.append(
                f"{self.mismatched} request(s) with the same id carry different prompts; not compared "
                "(were the cells run with different prompt sets or seeds?)"
            )
        if self.acc_a.unaligned or self.acc_b.unaligned:
            out.append(
                f"{self.acc_a.unaligned + self.acc_b.unaligned} request(s) whose verify steps do not "
                "account for their tokens; left out of the common-prefix acceptance"
            )
        return out


def _key(row: RequestRecord) -> tuple:
    return (row.repeat, row.id)


def compare_outputs(a: str, rows_a: Rows, b: str, rows_b: Rows) -> PairDivergence:
    """Pair two cells' requests (``requests.jsonl`` rows as records, tagged with their repeat or not;
    plain rows are validated here) and measure divergence."""
    by_b = {_key(r): r for r in requests_of(rows_b)}
    pairs: list[PromptPair] = []
    mismatched = unpaired = 0
    acc_a, acc_b = SideAcceptance(), SideAcceptance()
    units = set()
    for ra in requests_of(rows_a):
        rb = by_b.pop(_key(ra), None)
        oa, ob = output_of(ra), (output_of(rb) if rb is not None else None)
        if rb is None or oa is None or ob is None or oa[1] != ob[1]:
            unpaired += 1
            continue
        if ra.prompt_id != rb.prompt_id:
            mismatched += 1
            continue
        (sa, unit), (sb, _) = oa, ob
        units.add(unit)
        pos = first_divergence(sa, sb)
        common = [
            _add_side(side, row.spec_decode, len(seq) if unit == "token" else None, pos)
            for side, row, seq in ((acc_a, ra, sa), (acc_b, rb, sb))
        ]
        pairs.append(
            PromptPair(
                ra.repeat,
                len(pairs) if ra.id is None else int(ra.id),
                str(ra.prompt_id),
                pos,
                len(sa),
                len(sb),
                *common,
            )
        )
    unpaired += len(by_b)
    return PairDivergence(
        a=a,
        b=b,
        unit="token" if units == {"token"} else ("char" if units else "token"),
        prompts=pairs,
        mismatched=mismatched,
        unpaired=unpaired,
        acc_a=acc_a,
        acc_b=acc_b,
    )


def _add_side(side: SideAcceptance, spec: SpecDecode | None, n_tokens: int | None, pos: int | None) -> Counts | None:
    """Adds one request's counts to ``side``; returns its common-prefix counts (None when unknown)."""
    plain = plain_counts(spec)
    if spec is None or plain is None:
        return None
    side.plain.append(plain)
    if spec.per_step_accepted is None and plain.num_drafts == 0:
        side.common.append(plain)  # no verify steps: nothing to restrict
        return plain
    if n_tokens is None:
        return None
    common = step_counts(spec, n_tokens, pos)
    if common is None:
        if spec.per_step_accepted is not None:
            side.unaligned += 1
        return None
    side.common.append(common)
    return common


@dataclass
class CommonPrefixIntervals:
    """Common-prefix AL of each side (over the prompts with per-step data on that side) and of B - A
    (over the prompts with per-step data on both); NaN where a side has none."""

    prompts: int  # paired requests with common-prefix counts on both sides (the difference's data)
    clusters: int  # distinct prompt ids (the resampling unit)
    drafts_a: int
    drafts_b: int
    al_a: float
    al_b: float
    delta: float
    ci_a: tuple[float, float]
    ci_b: tuple[float, float]
    ci_delta: tuple[float, float]
    confidence: float


def common_prefix_intervals(
    pair: PairDivergence, *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> CommonPrefixIntervals | None:
    """Paired, prompt-clustered bootstrap of the common-prefix AL (see the module docstring).

    None when neither side has common-prefix counts; NaN intervals with fewer than two prompt ids
    (no spread to resample).
    """
    used = [p for p in pair.prompts if p.common_a is not None or p.common_b is not None]
    if not used:
        return None
    # per prompt id, summed over its requests: [D_a, A_a, D_b, A_b] (each side where it has counts),
    # then the same over only the requests with counts on both sides (for the difference)
    clusters: dict[str, np.ndarray] = {}
    for p in used:
        both = p.common_a is not None and p.common_b is not None
        row = np.zeros(8)
        for j, c in ((0, p.common_a), (2, p.common_b)):
            if c is not None:
                row[j : j + 2] = (c.num_drafts, c.accepted_tokens)
                if both:
                    row[4 + j : 6 + j] = (c.num_drafts, c.accepted_tokens)
        clusters[p.prompt_id] = clusters.get(p.prompt_id, 0) + row
    m = np.asarray(list(clusters.values()))

    def stats(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore"):
            al = [1 + sums[..., j + 1] / sums[..., j] for j in (0, 2, 4, 6)]
        return al[0], al[1], al[3] - al[2]

    a, b, d = (float(x) for x in stats(m.sum(axis=0)))
    nan = (float("nan"), float("nan"))
    ci_a = ci_b = ci_d = nan
    if len(m) >= 2:
        ra, rb, rd = stats(resample_weights(len(m), n_resamples, np.random.default_rng(seed)) @ m)
        ci_a, ci_b, ci_d = (percentile_interval(x, confidence) if not np.isnan(x).all() else nan for x in (ra, rb, rd))
    n_both = sum(1 for p in used if p.common_a is not None and p.common_b is not None)
    return CommonPrefixIntervals(
        prompts=n_both,
        clusters=len(m),
        drafts_a=int(m[:, 0].sum()),
        drafts_b=int(m[:, 2].sum()),
        al_a=a,
        al_b=b,
        delta=d,
        ci_a=ci_a,
        ci_b=ci_b,
        ci_delta=ci_d,
        confidence=confidence,
    )

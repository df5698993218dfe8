"""Which prompts an acceptance change is computed over: paired by prompt, unpaired, or the units.

When both sides carry per-request counts with prompt ids, a prompt is the unit (every request and
repeat of it pooled). Only prompts with a finished request on both sides are paired; a prompt on
one side only (an errored request, another prompt set) is counted, reported, and left out of both
sides' figures. Counting it as zeros on the other side compared different prompt mixes: 12
bit-identical prompts plus 8 errored ones read as a regression, and a real regression with the 8
hardest prompts errored passed. When more than :data:`MAX_UNMATCHED` of either side's prompts are
unmatched the acceptance checks are inconclusive: the paired rest need not stand for the load.
With no prompt in common the two sides are compared unpaired (prompts as independent units) and
labelled so. Without prompt ids the units of acceptance.json (requests, log windows, repeats) are
compared unpaired.

A verdict needs :data:`MIN_PROMPTS` independent prompts: under greedy decoding the requests of one
prompt repeat one another, so a single-prompt load has one unit however many requests it sends
(its zero-width intervals failed every cell over one lost token). In A/A studies drawn from the
default study's real requests, the paired interval's one-sided false-alarm rate was up to 4.4% at
2 prompts and 2.2-3.3% from 3 up (2.5% meant; docs/methods.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specbench.compare.verdicts import PairingSummary
from specbench.records.counts import Counts

# Share of a side's prompts that may lack a partner on the other side before no verdict is given.
MAX_UNMATCHED = 0.20
# Independent prompts (per side) an acceptance verdict needs.
MIN_PROMPTS = 3


@dataclass
class Pairing:
    kind: str  # "paired" | "unpaired" (prompt ids, none in common) | "units" (no prompt ids)
    base: dict[str, Counts] | list[Counts]  # paired: {prompt id: counts}; else the units
    cand: dict[str, Counts] | list[Counts]
    only_base: list[str] = field(default_factory=list)  # prompts with no finished request in the candidate
    only_cand: list[str] = field(default_factory=list)
    n_base: int = 0  # prompts (or units) each side had
    n_cand: int = 0
    blocked: str = ""  # why the acceptance checks cannot be decided, or ""
    not_sent: list[str] = field(default_factory=list)  # baseline prompts the candidate never sent (a sized subset)

    @property
    def complete(self) -> bool:
        """Every prompt of both sides is in the figures (or there are no prompt ids): the exact
        /metrics totals then describe the same requests and may give the point."""
        return self.kind == "units" or (self.kind == "paired" and not self.only_base and not self.only_cand)

    def too_few(self) -> str:
        """Why there are too few independent prompts for a verdict, or "" (units: intervals.py's rule)."""
        if self.kind == "units":
            return ""
        n = len(self.base) if self.kind == "paired" else min(self.n_base, self.n_cand)
        if n >= MIN_PROMPTS:
            return ""
        what = f"{n} paired" if self.kind == "paired" else f"{self.n_base} vs {self.n_cand}, unpaired"
        return (
            f"too few independent prompts: {what}; a verdict needs >= {MIN_PROMPTS} distinct prompts per side "
            "(requests repeating a prompt are not independent)"
        )

    def describe(self) -> str:
        if self.kind == "units":
            return f"unpaired: {self.n_base} vs {self.n_cand} units (no prompt ids)"
        if self.kind == "unpaired":
            return f"unpaired: no prompt in common ({self.n_base} vs {self.n_cand} prompts)"
        text = f"paired by prompt: {len(self.base)} prompts on both sides"
        if self.not_sent:
            text += f"; {len(self.not_sent)} baseline prompts the candidate did not send (left out by design)"
        lost = len(self.only_base) - len(self.not_sent)
        if lost or self.only_cand:
            text += (
                f"; unmatched, left out: {lost} of {self.n_base - len(self.not_sent)} baseline prompts sent, "
                f"{len(self.only_cand)} of {self.n_cand} candidate prompts"
            )
        return text

    def summary(self) -> PairingSummary:
        return PairingSummary(
            kind=self.kind,
            shared=len(self.base) if self.kind == "paired" else 0,
            baseline_prompts=self.n_base,
            candidate_prompts=self.n_cand,
            only_in_baseline=list(self.only_base),
            only_in_candidate=list(self.only_cand),
            description=self.describe(),
        )


def text_clash(base_texts: dict[str, str], cand_texts: dict[str, str]) -> str:
    """Why prompt ids cannot pair the sides, or "": a shared id whose recorded ``prompt_sha256``
    differs names two different texts (another data file, another version of it, another sampler)."""
    shared = [p for p in base_texts if p in cand_texts]
    differ = [p for p in shared if base_texts[p] != cand_texts[p]]
    if not differ:
        return ""
    return (
        f"{len(differ)} of {len(shared)} shared prompt ids name different texts on the two sides (first: "
        f"{differ[0]!r}; another data file or sampler? the manifests' workloads say which)"
    )


def pair(
    base_clusters: dict[str, Counts],
    cand_clusters: dict[str, Counts],
    base_units: list[Counts],
    cand_units: list[Counts],
    cand_sent: dict[str, bool] | None = None,
) -> Pairing:
    """The pairing of two cells' acceptance: ``*_clusters`` per prompt ({} without prompt ids),
    ``*_units`` acceptance.json's units (the fallback without prompt ids). ``cand_sent``: every prompt
    id the candidate sent, finished or not, -> whether all its requests errored. A baseline prompt the
    candidate never sent (``run --gate-baseline`` sends the first N of the baseline's prompts) is left
    out by design, not unmatched: the share that may be lost is of the prompts the candidate sent."""
    kb, kc = base_clusters, cand_clusters
    if not kb or not kc:
        return Pairing("units", base_units, cand_units, n_base=len(base_units), n_cand=len(cand_units))
    shared = [p for p in kb if p in kc]
    only_b, only_c = [p for p in kb if p not in kc], [p for p in kc if p not in kb]
    if not shared:
        return Pairing("unpaired", list(kb.values()), list(kc.values()), only_b, only_c, len(kb), len(kc))
    out = Pairing("paired", {p: kb[p] for p in shared}, {p: kc[p] for p in shared}, only_b, only_c, len(kb), len(kc))
    sent = cand_sent if cand_sent is not None else {p: False for p in kc}
    out.not_sent = [p for p in only_b if p not in sent]
    lost = [p for p in only_b if p in sent]  # the candidate sent them; none of their requests finished
    asked = len(kb) - len(out.not_sent)
    worst = max(len(lost) / max(asked, 1), len(only_c) / len(kc))
    if worst > MAX_UNMATCHED:
        errored = sum(1 for p in lost if sent[p])
        not_sent = f" ({len(out.not_sent)} more it never sent: left out by design)" if out.not_sent else ""
        out.blocked = (
            f"prompts unmatched between the sides: {len(lost)} of the {asked} baseline prompts the candidate "
            f"sent have no finished request in it{not_sent}, {errored} of them because every request errored "
            f"(first lost: {', '.join(repr(p) for p in lost[:3]) or 'none'}); {len(only_c)} of {len(kc)} candidate "
            f"prompts have none in the baseline; more than {MAX_UNMATCHED:.0%} of a side unmatched, so the "
            f"{len(shared)} paired prompts need not stand for the load"
        )
    return out

"""What a report leads with: one short answer per question the matrix asks.

A question is an axis (output norm, MLA, pos-0 mask, method, k, workload, ...). Its answer is built
from the report's contrasts (cells that differ in that axis only): per pair of values, the AL change
in words with its CI, summarised over the other axes' settings, the confounds vLLM attested beside it,
and for a difference that is not significant the size the interval still leaves open ("a difference
up to X not ruled out"). Speed-up over no speculation and the k advice are questions of their own.
index.html shows these blocks first; the terminal prints their lines. Pure: report in, text out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from specbench.analysis.acceptance import significant
from specbench.analysis.where_it_pays import K_AXES, where_it_pays
from specbench.io import cache_root
from specbench.render import format as fmt
from specbench.render.tables import axis_name, cell_title

# The question an axis asks, in words (any other axis by its short name).
QUESTIONS = {
    "output_norm": "EAGLE output norm",
    "mla": "MLA",
    "pos0_mask": "Position-0 mask",
    "SPECBENCH_POS0_MASK": "Position-0 mask",
    "method": "Draft method",
    "num_speculative_tokens": "Draft length k",
    "k": "Draft length k",
    "draft": "Draft model",
    "workload": "Workload",
    "vllm": "vLLM version",
    "concurrency": "Concurrency",
}
# Why an attested confound is there, where specbench knows it (vLLM-CPU's platform rules).
WHY = {
    ("mla", "chunked_prefill"): "vLLM on CPU turns chunked prefill and prefix caching off whenever MLA is on",
    ("mla", "prefix_caching"): "vLLM on CPU turns chunked prefill and prefix caching off whenever MLA is on",
}


@dataclass
class Answer:
    """One question's block: ``lines`` the answer in words (one per pair of values, and throughput),
    ``confounds`` what else differed (attested), ``details`` every contrast behind it."""

    axis: str
    question: str
    lines: list[str] = field(default_factory=list)
    confounds: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    strength: float = 0.0  # the largest significant |ΔAL| (orders the blocks)


def _ruled(lo: float, hi: float, digits: int) -> str:
    x = max(abs(lo), abs(hi))
    return f"a difference up to {fmt.num(x, digits)} not ruled out"


def _one(delta: float, iv: tuple[float, float] | None, digits: int) -> str:
    shown = fmt.with_ci(delta, iv, digits, sign=True)
    if iv is None:
        return f"{shown} (no CI: too few units)"
    if significant(iv):
        return f"{'higher' if delta > 0 else 'lower'}, {shown}, significant"
    return f"{shown}, not significant: {_ruled(iv[0], iv[1], digits)}"


def _settings(n: int) -> str:
    return "either setting" if n == 2 else f"any of {n} settings"


def summarise(items: list[tuple[float, tuple[float, float] | None, str]], digits: int) -> str:
    """A change over one or more settings of the other axes (``(Δ, CI, setting)``), in words: its
    direction where every setting agrees and is significant, else how much is still not ruled out."""
    if len(items) == 1:
        return _one(items[0][0], items[0][1], digits)
    with_ci = [(d, iv, ctx) for d, iv, ctx in items if iv is not None]
    sig = [(d, iv, ctx) for d, iv, ctx in with_ci if significant(iv)]
    rest = [iv for _, iv, _ in with_ci if not significant(iv)]
    n = len(items)
    each = "; ".join(f"{fmt.with_ci(d, iv, digits, sign=True)} ({ctx or 'all'})" for d, iv, ctx in sig)
    lo, hi = min(d for d, _, _ in items), max(d for d, _, _ in items)
    span = f"Δ {fmt.num(lo, digits, sign=True)} to {fmt.num(hi, digits, sign=True)}"
    if fmt.num(lo, digits) == fmt.num(hi, digits):
        span = f"Δ {fmt.num(lo, digits, sign=True)} in each"
    not_ruled = (
        f"a difference up to {fmt.num(max((max(abs(a), abs(b)) for a, b in rest), default=0.0), digits)} not ruled out"
    )
    if sig and len(sig) == n and len({d > 0 for d, _, _ in sig}) == 1:
        word = "higher" if sig[0][0] > 0 else "lower"
        if n == 2:
            return f"{word} in both settings, significant: {each}"
        ends = f"[{fmt.num(min(iv[0] for _, iv, _ in sig), digits, sign=True)}, {fmt.num(max(iv[1] for _, iv, _ in sig), digits, sign=True)}]"
        return f"{word} in all {n} settings, {span}, each significant (the CIs within {ends})"
    if not with_ci:
        where = "either setting" if n == 2 else f"all {n} settings"
        return f"no CI in {where} (too few units; {span})"
    if not sig:
        nci = "" if len(with_ci) == n else f" ({n - len(with_ci)} without a CI)"
        return f"not significant in {_settings(n)}{nci} ({span}): {not_ruled}"
    return f"significant in {len(sig)} of {n} settings: {each}; elsewhere {not_ruled}"


def _setting(c: Any, repeats: bool) -> str:
    """The other axes' values of a contrast, and its repeat where the run has several."""
    return " · ".join(x for x in (cell_title(c.others), f"r{c.repeat}" if repeats else "") if x)


def _pair_line(axis: str, cand: str, base: str, diffs: list[Any]) -> str:
    head = fmt.one_line(f"{axis_name(axis)} {cand} vs {base}")
    parts = []
    repeats = len({c.repeat for c in diffs}) > 1
    for stat, name, digits in (("mean_acceptance_length", "AL", 2), ("p0", "p_0", 3)):
        items = [(c.delta[stat], c.intervals.get(stat), _setting(c, repeats)) for c in diffs if stat in c.delta]
        if items:
            parts.append(f"{name} {summarise(items, digits)}")
    return f"{head}: " + ("; ".join(parts) if parts else "no AL on a side")


def _confound_lines(axis: str, cand: str, base: str, diffs: list[Any]) -> list[str]:
    seen = sorted({x for c in diffs for x in c.confounds})
    out = []
    if seen:
        why = sorted({WHY[(axis, x.split(" ", 1)[0])] for x in seen if (axis, x.split(" ", 1)[0]) in WHY})
        out.append(
            fmt.one_line(f"{axis_name(axis)} {cand} vs {base} also differs in {', '.join(seen)} (attested by vLLM)")
            + (f": {'; '.join(why)}" if why else "")
            + f", so the change is not {axis_name(axis)} alone"
        )
    missing = sorted({x for c in diffs for x in c.unattested})
    if missing:
        out.append(f"not attested by vLLM on either side: {', '.join(missing)}")
    return out


def _throughput_lines(found: list[Any]) -> list[str]:
    """No-spec output tok/s per pair of values, over the other axes' settings (as the AL lines)."""
    by_pair: dict[tuple[str, str, str], list[Any]] = {}
    for t in found:
        by_pair.setdefault((t.axis, t.cand_value, t.base_value), []).append(t)
    out = []
    for (axis, cand, base), ts in by_pair.items():
        head = fmt.one_line(f"{axis_name(axis)} {cand} vs {base}")
        lo, hi = min(t.interval[0] for t in ts), max(t.interval[1] for t in ts)
        sig = [t for t in ts if t.significant()]
        if len(ts) == 1:
            ctx = cell_title(ts[0].others)
            ratio = f"{fmt.num(ts[0].point, 2)}× [{fmt.num(lo, 2)}, {fmt.num(hi, 2)}]"
            head += f" ({ctx})" if ctx else ""
        else:
            where = "both settings" if len(ts) == 2 else f"all {len(ts)} settings"
            ratio = f"{fmt.num(min(t.point for t in ts), 2)}× to {fmt.num(max(t.point for t in ts), 2)}× in {where}"
        if not sig:
            verdict = f"not significant: anything from {fmt.num(lo, 2)}× to {fmt.num(hi, 2)}× not ruled out"
        else:
            verdict = "significant in " + "; ".join(
                f"{cell_title(t.others) or 'all'} ({fmt.num(t.point, 2)}× [{fmt.num(t.interval[0], 2)}, {fmt.num(t.interval[1], 2)}])"
                for t in sig
            )
        out.append(f"{head}, no speculation: output tok/s {ratio}, {verdict}")
    return out


def axis_answers(comparisons: list[Any], throughputs: list[Any]) -> list[Answer]:
    """One block per axis the contrasts vary, the axes with the largest significant AL change first."""
    by_axis: dict[str, dict[tuple[str, str], list[Any]]] = {}
    for c in comparisons:
        by_axis.setdefault(c.axis, {}).setdefault((c.cand_value, c.base_value), []).append(c)
    out = []
    for axis, pairs in by_axis.items():
        a = Answer(axis, QUESTIONS.get(axis, axis_name(axis)))
        for (cand, base), diffs in pairs.items():
            a.lines.append(_pair_line(axis, cand, base, diffs))
            a.confounds += _confound_lines(axis, cand, base, diffs)
            a.details += [c.sentence() for c in diffs]
            iv_al = [
                (c.delta.get("mean_acceptance_length", 0.0), c.intervals.get("mean_acceptance_length")) for c in diffs
            ]
            a.strength = max([a.strength] + [abs(d) for d, iv in iv_al if iv is not None and significant(iv)])
        a.lines += _throughput_lines([t for t in throughputs if t.no_spec and t.axis == axis])
        out.append(a)
    return sorted(out, key=lambda a: -a.strength)


def speedup_answer(speedups: list[Any]) -> Answer | None:
    """Speed-up over serving without speculation, over every speculative cell, in one line."""
    if not speedups:
        return None
    pts = [s.point["output_tok_per_s"] for s in speedups]
    ivs = [s.intervals.get("output_tok_per_s") for s in speedups]
    slower = sum(1 for iv in ivs if iv is not None and iv[1] < 1)
    faster = sum(1 for iv in ivs if iv is not None and iv[0] > 1)
    n = len(speedups)
    if n == 1:
        head = f"speed-up {fmt.with_ci(pts[0], ivs[0], 2)}× output tok/s"
    else:
        head = f"speed-up {fmt.num(min(pts), 2)}× to {fmt.num(max(pts), 2)}× output tok/s over {n} speculative cells"
    lows = [iv[0] for iv in ivs if iv is not None]
    highs = [iv[1] for iv in ivs if iv is not None]
    ends = f" (CIs within [{fmt.num(min(lows), 2)}, {fmt.num(max(highs), 2)}])" if n > 1 and lows else ""
    undecided = n - slower - faster
    if not slower and not faster:
        counts = "none significantly slower or faster (" + ("its" if n == 1 else "every") + " CI includes 1×)"
    else:
        counts = ", ".join(
            x
            for x in (
                f"significantly slower in {'all ' if slower == n else ''}{slower}" if slower else "",
                f"significantly faster in {faster}" if faster else "",
                f"neither ruled out in {undecided}" if undecided else "",
            )
            if x
        )
    costs = [s.point["cost_ratio"] for s in speedups]
    why = (
        f"; a verify step cost {fmt.span(costs)} plain decode steps, and speed-up "
        "≈ AL / step cost (below 1×: slower than serving without speculation)"
    )
    return Answer("speed-up", "Speed-up over no speculation", [f"{head}{ends}: {counts}{why}"])


def fixture_caveat(provenance: list[Any]) -> str | None:
    """One line when a run's target is a specbench fixture (a ``fixture:*`` ref or a fixture's path)."""
    models = [getattr(p, "model", None) for p in provenance]
    named = [str(m) for m in models if m is not None and is_fixture(m)]
    if not named:
        return None
    return (
        f"Target {', '.join(sorted(set(named)))} is a tiny specbench test fixture (built locally, a few MB, run on "
        "CPU): these numbers test the machinery and say nothing about a real model's draft head."
    )


def is_fixture(model: Any) -> bool:
    """A ``fixture:*`` reference, or a path inside specbench's fixture cache."""
    text = str(model)
    if text.startswith("fixture:"):
        return True
    path = PurePath(text)
    root = cache_root() / "fixtures"
    return path.is_relative_to(root) or ("specbench", "fixtures") in zip(path.parts, path.parts[1:])


def report_answers(report: Any) -> list[Answer]:
    """Every block a report leads with: one per axis, then speed-up, then k (merged into the k axis'
    block when the matrix varies k)."""
    from specbench.report.choosing_k import k_summary  # lazy: numpy, only when a report is shown

    throughputs = [t for st in report.studies for t in st.throughputs]
    out = axis_answers(report.comparisons, throughputs)
    speed = speedup_answer([s for st in report.studies for s in st.speedups])
    pays = {id(st): line for st in report.studies if (line := where_it_pays(st.speedups, st.cell_axes))}
    if speed is not None:
        speed.lines = list(pays.values()) + speed.lines  # the answer first: where speculation pays on this run
        out.append(speed)
    advice = [line for st in report.studies if (line := k_summary(st.kpredictions, report.title))]
    varies_k = [st for st in report.studies if any(set(a) & set(K_AXES) for a in st.cell_axes.values())]
    if advice:  # the k advice says at which concurrency which k pays, as measured
        advice += [pays[id(st)] for st in varies_k if id(st) in pays]
    if advice:
        k_axis = next((a for a in out if a.axis in ("num_speculative_tokens", "k")), None)
        if k_axis is None:
            out.append(Answer("k advice", QUESTIONS["k"], advice))
        else:
            k_axis.lines += advice
    return out

"""The "choosing k" section of ``specbench report``: predictions at k' <= k beside measured cells.

Pure rendering of :class:`specbench.analysis.kpredict.KPrediction` objects (computed by
:func:`specbench.report.baseline_pairs.analyse_run`): a Markdown table, CSV records, and one sentence of k
advice per source cell: a recommended k only from a prediction the run's cells checked and did not
reject; otherwise the failed check with its miss, or that nothing checked it.
"""

from __future__ import annotations

from typing import Any

from specbench.analysis.kpredict import AL_ASSUMPTION, COST_ASSUMPTION, KPoint, KPrediction
from specbench.render import format as fmt


def _f(x: float, digits: int = 2) -> str:
    return fmt.num(x, digits)


def _ci(x: float, iv: tuple[float, float], digits: int = 2, signed: bool = False) -> str:
    return fmt.with_ci(x, iv, digits, sign=signed)


def _yes(flag: bool | None) -> str:
    return fmt.MISSING if flag is None else ("yes" if flag else "**no**")


def recommendation(kp: KPrediction, title: str | None = None, *, brief: bool = False) -> str:
    """The k advice from one source cell: a recommended k only from a prediction that passed its checks
    against the run's own cells; otherwise what failed (with the miss and its CI), or that nothing
    checked it, and what was measured. ``brief``: an unchecked prediction without its assumptions
    (the terminal says them once: :data:`UNCHECKED_ASSUMPTIONS`)."""
    source = title or kp.source
    if kp.failed_checks:
        return (
            f"{source}: no k recommended — the prediction from k = {kp.k} fails its checks against this "
            f"run's cells: {'; '.join(_miss(kp, k, what) for k, what in kp.failed_checks)}. "
            f"{_measured(kp)}"
        )
    if not kp.checked:
        best = kp.best
        others = ", ".join(str(p.k) for p in kp.points if p.k != kp.k)
        if brief:
            return (
                f"{source}: no k recommended (unchecked prediction from k = {kp.k}: best {_figure(best)} at "
                f"k = {best.k}). {_measured(kp)}"
            )
        return (
            f"{source}: no k recommended — the prediction from k = {kp.k} is unchecked: the run measured "
            f"no other k to hold it against. It assumes that {AL_ASSUMPTION}, and that {COST_ASSUMPTION}; on those "
            f"assumptions the best is {_figure(best)} at k = {best.k}. Add num_speculative_tokens values "
            f"({others}) to check it. {_measured(kp)}"
        )
    best = kp.best
    checked = f"checked at k' = {', '.join(map(str, kp.checked))}: AL and step cost within their CIs"
    figure = f"{_figure(best)} at k = {best.k} with the {_cost_source(kp, best)}"
    if kp.best_k is not None:
        return f"{source}: k = {kp.best_k} (predicted speed-up {figure}; {checked})"
    if best.speedup_ci[1] < 1:
        return f"{source}: no k — speculation is predicted slower at every k (best {figure}; {checked})"
    return f"{source}: no k clearly faster than no speculation (best {figure}: the interval includes 1; {checked})"


UNCHECKED_ASSUMPTIONS = (
    f"k advice: a prediction from one k is unchecked until the run measures another k; it assumes that "
    f"{AL_ASSUMPTION}, and that {COST_ASSUMPTION}. Add num_speculative_tokens values to check it."
)


def advice_lines(kpredictions: list[KPrediction], title=lambda label: label) -> list[str]:
    """The k advice of one study, as the screen and index.html give it: the assumptions of its
    unchecked predictions once (when more than one), then one line per source cell."""
    unchecked = [kp for kp in kpredictions if not kp.failed_checks and not kp.checked]
    brief = len(unchecked) > 1
    head = [UNCHECKED_ASSUMPTIONS] if brief else []
    return head + [f"k advice from {recommendation(kp, title(kp.source), brief=brief)}" for kp in kpredictions]


def k_summary(kps: list[KPrediction], title=lambda label: label) -> str | None:
    """The k advice of one study in one line, whatever the number of cells: what is recommended and
    from which cell, how many predictions failed their checks, how many are unchecked and why
    (the terminal's default and index.html's answer; the per-cell advice is :func:`advice_lines`)."""
    if not kps:
        return None
    rec = [kp for kp in kps if kp.best_k is not None]
    failed = [kp for kp in kps if kp.failed_checks]
    unchecked = [kp for kp in kps if not kp.failed_checks and not kp.checked]
    other = len(kps) - len(rec) - len(failed) - len(unchecked)
    parts = [f"k = {kp.best_k} from {title(kp.source)} (checked)" for kp in rec]
    if failed:
        parts.append(f"the predictions of {len(failed)} cell(s) fail their checks against the run's own cells")
    if unchecked:
        ks = sorted({kp.k for kp in unchecked})
        best = [kp.best for kp in unchecked]
        parts.append(
            f"{len(unchecked)} cell(s) measured at k = {', '.join(map(str, ks))} only, so their predictions are "
            f"unchecked (best {_f(min(b.speedup for b in best))}× to {_f(max(b.speedup for b in best))}× "
            f"at k = {', '.join(sorted({str(b.k) for b in best}))}); add num_speculative_tokens values to check them"
        )
    if other:
        parts.append(f"{other} checked cell(s) predict no k clearly faster than no speculation")
    return ("k advice: " if rec else "No k recommended: ") + "; ".join(parts) + "."


def _figure(p: KPoint) -> str:
    lo, hi = p.speedup_ci
    return f"{_f(p.speedup)}× [{_f(lo)}, {_f(hi)}]"


def _cost_source(kp: KPrediction, p: KPoint) -> str:
    if p.cell is not None or p.k == kp.k:  # k' = k: the source cell's own step cost
        return "measured step cost"
    return "linear cost model (checked)"


def _miss(kp: KPrediction, k: int, what: str) -> str:
    p = next(x for x in kp.points if x.k == k)
    if what == "al":
        return (
            f"AL at k' = {k} predicted {_ci(p.al_pred, p.al_pred_ci, 3)}, measured "
            f"{_ci(p.al_meas, p.al_meas_ci, 3)}, miss {_ci(p.al_pred - p.al_meas, p.al_diff_ci, 3, signed=True)} "
            f"(the rule 1 + Σ p_i assumes that {AL_ASSUMPTION})"
        )
    return (
        f"step cost at k' = {k} from the linear model {_ci(p.cost_model, p.cost_model_ci)} plain steps, "
        f"measured {_ci(p.cost_meas, p.cost_meas_ci)}, miss "
        f"{_ci(p.cost_model - p.cost_meas, p.cost_diff_ci, signed=True)} (the model assumes that "
        f"{COST_ASSUMPTION})"
    )


def _measured(kp: KPrediction) -> str:
    """The TPOT speed-ups the run measured (the source's own at k' = k): facts, not a prediction."""
    got = [
        f"k = {p.k}: {fmt.times(p.tpot_speedup_meas)} {fmt.interval(p.tpot_speedup_meas_ci, 2)}"
        for p in kp.points
        if not fmt.is_missing(p.tpot_speedup_meas)
    ]
    return f"Measured TPOT speed-up over the baseline (within this run): {'; '.join(got)}." if got else ""


def _same(label: str) -> str:
    return label


def _check(p: KPoint, own: bool) -> str:
    if own:
        return "source"
    if p.cell is None:
        return fmt.MISSING
    word = {True: "pass", False: "**fail**", None: fmt.MISSING}
    return f"{word[p.al_holds]} / {word[p.cost_holds]}"


def kprediction_rows(kps: list[KPrediction], title=_same) -> tuple[list[str], list[list[str]]]:
    header = [
        "source cell (k)",
        "k'",
        "AL predicted 1+Σp_i [CI]",
        "AL measured [CI]",
        "AL miss: predicted − measured [CI]",
        "step cost: linear model [CI]",
        "step cost measured [CI]",
        "cost miss: model − measured [CI]",
        "speed-up predicted [CI]",
        "TPOT speed-up measured [CI]",
        "checks: AL / cost",
    ]
    rows = []
    for kp in kps:
        for p in kp.points:
            own = p.k == kp.k
            sp = (
                (
                    _ci(p.speedup_pred_meas_cost, p.speedup_pred_meas_cost_ci)
                    + " (measured cost); "
                    + _ci(p.speedup_pred, p.speedup_pred_ci)
                    + " (model)"
                )
                if p.cell
                else _ci(p.speedup_pred, p.speedup_pred_ci)
            )
            measured = _ci(p.al_meas, p.al_meas_ci, 3) + (f" {title(p.cell)}" if p.cell else "")
            rows.append(
                [
                    f"{title(kp.source)} ({kp.k})",
                    f"{p.k}{' (source: identity)' if own else ''}",
                    _ci(p.al_pred, p.al_pred_ci, 3),
                    measured,
                    _ci(p.al_pred - p.al_meas, p.al_diff_ci, 3, signed=True),
                    _ci(p.cost_model, p.cost_model_ci),
                    _ci(p.cost_meas, p.cost_meas_ci),
                    _ci(p.cost_model - p.cost_meas, p.cost_diff_ci, signed=True),
                    sp,
                    _ci(p.tpot_speedup_meas, p.tpot_speedup_meas_ci),
                    _check(p, own),
                ]
            )
    return header, rows


def render_kpredictions(kps: list[KPrediction], source: str, md_table, title=_same) -> list[str]:
    if not kps:
        return []
    pct = f"{kps[0].confidence:.0%}"
    return (
        [f"Run {source}:", "", md_table(*kprediction_rows(kps, title)), ""]
        + [f"- k advice: {recommendation(kp, title(kp.source))}" for kp in kps]
        + [""]
        + [f"- {title(kp.source)}: {n}" for kp in kps for n in kp.notes]
        + [
            f"Brackets: {pct} bootstrap CI over requests, all cells resampled together when they sent the same "
            "requests.",
            "",
        ]
    )


KPREDICTION_INTRO = (
    "A prediction, unlike the decomposition above, and checked before it advises. From one cell at k, AL at each "
    "k' ≤ k is 1 + Σ_{i<k'} p_i (its per-position acceptance), which assumes that " + AL_ASSUMPTION + "; a verify "
    "step's cost in plain decode steps at k' is the line through the baseline's plain step and the cell's measured "
    "cost, c(k') = 1 + (c(k) − 1)·k'/k, which assumes that " + COST_ASSUMPTION + ". At every k' < k the run "
    "measured (a num_speculative_tokens axis) both are checked: a check passes when the CI of the miss "
    "(predicted − measured) includes 0. Speed-up = AL / cost (the measured cost where there is a cell at k'), "
    "decode only, so it is held against the measured TPOT speed-up. A k is recommended only from a prediction "
    "that was checked at one k' at least and passed every check, and whose best speed-up's CI lies above 1; "
    'otherwise the advice says which check failed, or that nothing checked it. "identity": at k\' = k nothing '
    "is predicted."
)


def kprediction_records(kps: list[KPrediction], run: str) -> list[dict[str, Any]]:
    """One numeric row per (source cell, k') for kprediction.csv."""
    out = []
    for kp in kps:
        for p in kp.points:
            row: dict[str, Any] = {
                "run": run,
                "source_cell": kp.source,
                "baseline": kp.baseline,
                "source_k": kp.k,
                "k": p.k,
                "measured_cell": p.cell,
                "recommended_k": kp.best_k,
                "best_k": kp.best.k,
                "paired": kp.paired,
            }
            for name in (
                "al_pred",
                "cost_model",
                "speedup_pred",
                "al_meas",
                "cost_meas",
                "tpot_speedup_meas",
                "speedup_pred_meas_cost",
            ):
                row[name] = getattr(p, name)
                row[f"{name}_ci_low"], row[f"{name}_ci_high"] = getattr(p, f"{name}_ci")
            row["al_diff"] = p.al_pred - p.al_meas
            row["al_diff_ci_low"], row["al_diff_ci_high"] = p.al_diff_ci
            row["al_inside_ci"], row["speedup_inside_ci"] = p.al_inside, p.speedup_inside
            row["model_speedup_inside_ci"] = p.model_speedup_inside
            row["cost_diff"] = p.cost_model - p.cost_meas
            row["cost_diff_ci_low"], row["cost_diff_ci_high"] = p.cost_diff_ci
            row["al_check"], row["cost_check"] = p.al_holds, p.cost_holds
            row["prediction_validated"] = kp.validated
            out.append(row)
    return out


__all__ = [
    "KPREDICTION_INTRO",
    "KPoint",
    "kprediction_records",
    "k_summary",
    "kprediction_rows",
    "recommendation",
    "render_kpredictions",
]

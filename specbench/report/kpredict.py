"""The "choosing k" section of ``specbench report``: predictions at k' <= k beside measured cells.

Pure rendering of :class:`specbench.analysis.kpredict.KPrediction` objects (computed by
:func:`specbench.report.study.analyse_run`): a Markdown table, CSV records, and one sentence per
source cell recommending a k.
"""

from __future__ import annotations

from typing import Any

from specbench.analysis.kpredict import KPoint, KPrediction
from specbench.render import format as fmt


def _f(x: float, digits: int = 2) -> str:
    return fmt.num(x, digits)


def _ci(x: float, iv: tuple[float, float], digits: int = 2, signed: bool = False) -> str:
    return fmt.with_ci(x, iv, digits, sign=signed)


def _yes(flag: bool | None) -> str:
    return fmt.MISSING if flag is None else ("yes" if flag else "**no**")


def recommendation(kp: KPrediction, title: str | None = None) -> str:
    source = title or kp.source
    best = kp.best
    lo, hi = best.speedup_ci
    measured = best.cell is not None or best.k == kp.k  # k' = k: the source cell's own step cost
    cost = "measured step cost" if measured else "linear cost model, an assumption: measure a k axis to confirm"
    figure = f"{_f(best.speedup)}× [{_f(lo)}, {_f(hi)}] at k = {best.k} with the {cost}"
    if kp.best_k is not None:
        return f"{source}: k = {kp.best_k} (predicted speed-up {figure})"
    if hi < 1:
        return f"{source}: no k — speculation is predicted slower at every k (best {figure})"
    return (f"{source}: no k clearly faster than no speculation (best {figure}: the interval "
            "includes 1)")


def _same(label: str) -> str:
    return label


def kprediction_rows(kps: list[KPrediction], title=_same) -> tuple[list[str], list[list[str]]]:
    header = ["source cell (k)", "k'", "AL predicted 1+Σp_i [CI]", "AL measured [CI]", "predicted − measured [CI]",
              "step cost: model / measured", "speed-up predicted [CI]", "TPOT speed-up measured [CI]",
              "inside measured CI: AL / speed-up (model cost)"]
    rows = []
    for kp in kps:
        for p in kp.points:
            own = p.k == kp.k
            cost = f"{_f(p.cost_model)} / {_f(p.cost_meas)}"
            sp = (_ci(p.speedup_pred_meas_cost, p.speedup_pred_meas_cost_ci) + " (measured cost); "
                  + _ci(p.speedup_pred, p.speedup_pred_ci) + " (model)") if p.cell else _ci(p.speedup_pred,
                                                                                          p.speedup_pred_ci)
            inside = fmt.MISSING if p.cell is None else (f"{_yes(p.al_inside)} / {_yes(p.speedup_inside)} "
                                                         f"({_yes(p.model_speedup_inside)})")
            measured = _ci(p.al_meas, p.al_meas_ci) + (f" {title(p.cell)}" if p.cell else "")
            rows.append([f"{title(kp.source)} ({kp.k})", f"{p.k}{' (source: identity)' if own else ''}",
                         _ci(p.al_pred, p.al_pred_ci), measured,
                         _ci(p.al_pred - p.al_meas, p.al_diff_ci, signed=True), cost, sp,
                         _ci(p.tpot_speedup_meas, p.tpot_speedup_meas_ci), inside])
    return header, rows


def render_kpredictions(kps: list[KPrediction], source: str, md_table, title=_same) -> list[str]:
    if not kps:
        return []
    pct = f"{kps[0].confidence:.0%}"
    return [f"Run {source}:", "", md_table(*kprediction_rows(kps, title)), ""] + [
        f"- recommended: {recommendation(kp, title(kp.source))}" for kp in kps] + [""] + [
        f"- {title(kp.source)}: {n}" for kp in kps for n in kp.notes] + [
        f"Brackets: {pct} bootstrap CI over requests, all cells resampled together when they sent the same "
        "requests.", ""]


KPREDICTION_INTRO = (
    "A prediction, unlike the decomposition above: from one cell at k, AL at each k' ≤ k is 1 + Σ_{i<k'} p_i "
    "(its per-position acceptance; an approximation: steps start elsewhere at another k), and a verify step's "
    "cost in plain decode steps is the cell at k' where the run measured one (a num_speculative_tokens axis), "
    "else the model c(k') = 1 + (c(k) − 1)·k'/k (no draft = a plain step, cost linear in k; shown beside the "
    "measured cost, it is an assumption). Speed-up = AL / cost, decode only, so it is held against the "
    "measured TPOT speed-up. \"identity\": at k' = k nothing is predicted.")


def kprediction_records(kps: list[KPrediction], run: str) -> list[dict[str, Any]]:
    """One numeric row per (source cell, k') for kprediction.csv."""
    out = []
    for kp in kps:
        for p in kp.points:
            row: dict[str, Any] = {"run": run, "source_cell": kp.source, "baseline": kp.baseline, "source_k": kp.k,
                                   "k": p.k, "measured_cell": p.cell, "recommended_k": kp.best_k,
                                   "best_k": kp.best.k, "paired": kp.paired}
            for name in ("al_pred", "cost_model", "speedup_pred", "al_meas", "cost_meas", "tpot_speedup_meas",
                         "speedup_pred_meas_cost"):
                row[name] = getattr(p, name)
                row[f"{name}_ci_low"], row[f"{name}_ci_high"] = getattr(p, f"{name}_ci")
            row["al_diff"] = p.al_pred - p.al_meas
            row["al_diff_ci_low"], row["al_diff_ci_high"] = p.al_diff_ci
            row["al_inside_ci"], row["speedup_inside_ci"] = p.al_inside, p.speedup_inside
            row["model_speedup_inside_ci"] = p.model_speedup_inside
            out.append(row)
    return out


__all__ = ["KPREDICTION_INTRO", "KPoint", "kprediction_records", "kprediction_rows", "recommendation",
           "render_kpredictions"]

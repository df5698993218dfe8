"""The dynamic-K study's tables (docs/studies/dynamic-k.md), computed from its committed runs:
the schedule ``specbench report`` derives from the concurrency x k study, and the confirmation
study that serves it beside the best static k. benchmarks/dynamic_k.py prints them;
tests/testing/test_dynamic_k_doc.py checks the page holds exactly what this prints.

The schedule is the report's own (:func:`specbench.report.dynamic_k.study_schedules` over the
run's speed-ups); the confirmation's speed-ups are each cell's over its interleaved
no-speculation baseline (:func:`specbench.report.baseline_pairs.run_speedups`), and "schedule /
static" is the ratio of the two speed-ups at one concurrency, its 95% interval from their log
standard errors added in quadrature (each backed out of its own interval with the normal quantile,
which overstates a t interval's SE: the ratio's interval is if anything too wide). The K each step
ran with is vLLM's per-request ``per_step_drafted`` (:func:`specbench.report.dynamic_k.served_schedules`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from specbench.axis import UNSET
from specbench.report.dynamic_k import SCHEDULE_FIELD
from specbench.testing import BASELINES

K_BY_CONCURRENCY = BASELINES / "cpu-k-by-concurrency"
CONFIRMATION = BASELINES / "cpu-dynamic-k"
Z = 1.959964


def _ci(point: float, iv: tuple[float, float]) -> str:
    return f"{point:.2f}× [{iv[0]:.2f}, {iv[1]:.2f}]"


def _analysis(run: Path):
    from specbench.report.baseline_pairs import analyse_run  # lazy: the report's analysis (numpy)

    return analyse_run(run, n_resamples=200)


def schedule_table(run: Path = K_BY_CONCURRENCY) -> str:
    """Per concurrency each k's speed-up [CI] and the K the schedule takes there; then the schedule
    and the line to paste, as report's schedule.json has them."""
    study = _analysis(run)
    (sched,) = study.schedules
    ks = sorted({int(study.cell_axes[s.cell]["num_speculative_tokens"]) for s in study.speedups})
    levels = sorted({int(study.cell_axes[s.cell]["concurrency"]) for s in study.speedups})
    by = {
        (int(study.cell_axes[s.cell]["concurrency"]), int(study.cell_axes[s.cell]["num_speculative_tokens"])): s
        for s in study.speedups
    }
    out = ["| concurrency | " + " | ".join(f"k = {k}" for k in ks) + " | schedule's K |", "|---" * (len(ks) + 2) + "|"]
    choice = {c.concurrency: c.k for c in sched.schedule.choices}
    for c in levels:
        cells = [_ci(by[c, k].point["output_tok_per_s"], by[c, k].intervals["output_tok_per_s"]) for k in ks]
        out.append(f"| {c} | " + " | ".join(cells) + f" | {choice[c]} |")
    out += [
        "",
        f"Schedule: `{json.dumps(sched.schedule.entries)}`",
        "",
        "```",
        sched.paste(),
        "```",
    ]
    return "\n".join(out)


def _log_se(iv: tuple[float, float]) -> float:
    return (math.log(iv[1]) - math.log(iv[0])) / (2 * Z)


def confirmation_rows(run: Path = CONFIRMATION) -> list[dict[str, Any]]:
    """Per concurrency: the static cell's and the schedule's speed-up, their ratio, and the K the
    schedule's cell ran with (attested)."""
    study = _analysis(run)
    served = {s.cell: s for s in study.served}
    rows: dict[int, dict[str, Any]] = {}
    for s in study.speedups:
        axes = study.cell_axes[s.cell]
        c = int(axes["concurrency"])
        side = "static" if axes.get(SCHEDULE_FIELD) == UNSET else "schedule"
        rows.setdefault(c, {"concurrency": c})[side] = s
        if side == "schedule":
            rows[c]["ran"] = served[s.cell].ran
    out = []
    for c in sorted(rows):
        r = rows[c]
        st, sc = r["static"], r["schedule"]
        ratio = sc.point["output_tok_per_s"] / st.point["output_tok_per_s"]
        se = math.hypot(_log_se(st.intervals["output_tok_per_s"]), _log_se(sc.intervals["output_tok_per_s"]))
        r["ratio"], r["ratio_ci"] = ratio, (ratio * math.exp(-Z * se), ratio * math.exp(Z * se))
        out.append(r)
    return out


def confirmation_table(run: Path = CONFIRMATION) -> str:
    out = [
        "| concurrency | best static k: speed-up | schedule: speed-up | schedule / static | K per step (attested) |",
        "|---|---|---|---|---|",
    ]
    for r in confirmation_rows(run):
        st, sc, ran = r["static"], r["schedule"], r["ran"]
        lo, hi = r["ratio_ci"]
        verdict = "faster" if lo > 1 else "slower" if hi < 1 else "same within CI"
        out.append(
            f"| {r['concurrency']} | {_ci(st.point['output_tok_per_s'], st.intervals['output_tok_per_s'])} "
            f"| {_ci(sc.point['output_tok_per_s'], sc.intervals['output_tok_per_s'])} "
            f"| {_ci(r['ratio'], r['ratio_ci'])}: {verdict} | {ran.shares()} (schedule: {ran.expected}; {ran.status}) |"
        )
    return "\n".join(out)


def acceptance_table(run: Path = K_BY_CONCURRENCY) -> str:
    """Each cell's drafts, AL and p_i with their intervals, as ``specbench report``'s acceptance
    table prints them (its units and DAR columns left out)."""
    from specbench.report.assemble import build_report, render_markdown  # lazy: the report (pandas)

    lines = render_markdown(build_report([run]), plots=False).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| cell | units | drafts |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append("| " + " | ".join([cells[0], cells[2], cells[3], *cells[5:]]) + " |")
    return "\n".join(rows)


def all_tables(k_run: Path = K_BY_CONCURRENCY, confirm: Path | None = CONFIRMATION) -> dict[str, str]:
    out = {"schedule": schedule_table(k_run), "acceptance": acceptance_table(k_run)}
    if confirm is not None:
        out["confirmation"] = confirmation_table(confirm)
    return out

"""The dynamic-K schedule a study's speed-ups support (:mod:`specbench.analysis.schedule`): one per
setting of the study's other axes, written as ``schedule.json`` (the exact JSON vLLM takes, and the
``--speculative-config`` line to paste) and as a summary.md section.

A study gives one when it crosses ``load:concurrency`` (two or more values) with speculative cells
that have speed-ups over a no-speculation baseline at the same concurrency; k comes from a
``num_speculative_tokens`` axis or the study's static k.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Union

from specbench.analysis.schedule import Point, Schedule, StepK, derive, lookup, plain_steps, speculative_config, step_k
from specbench.axis import UNSET, list_value_text

CONCURRENCY = "concurrency"  # axis_label("load:concurrency")
K_AXIS = "num_speculative_tokens"


# A vLLM SpeculativeConfig field's value as a study passes it through, unread by specbench: JSON
# (config.Speculative refuses anything else), typed as the config wrote it.
SpecValue = Union[str, int, float, bool, None, list["SpecValue"], dict[str, "SpecValue"]]


@dataclass(frozen=True)
class ServingConfig:
    """The ``--speculative-config`` that serves a study's schedule: the method, draft and schedule
    (whose largest K is the static k: :func:`~specbench.analysis.schedule.speculative_config`), then
    the vLLM fields the setting ran with, passed through (serve.speculative's and its
    ``speculative:FIELD`` axes' values)."""

    method: str
    model: str | None  # the draft; None for an MTP method (left out of the JSON)
    schedule: Schedule
    passed: dict[str, SpecValue]  # a schedule axis's own value stands in place of the derived one

    def json(self) -> dict[str, SpecValue]:
        """The JSON vLLM takes, keys in the order it is written."""
        return {**speculative_config(self.schedule, self.method, self.model), **self.passed}


@dataclass
class StudySchedule:
    axes: dict[str, str]  # the other axes' setting it is for ({} when there are none)
    config: ServingConfig  # the --speculative-config that serves it

    @property
    def schedule(self) -> Schedule:
        return self.config.schedule

    def paste(self) -> str:
        return "--speculative-config '" + json.dumps(self.config.json(), separators=(",", ":")) + "'"

    def to_dict(self) -> dict[str, Any]:
        return {
            "axes": self.axes,
            "num_speculative_tokens_per_batch_size": self.schedule.entries,
            "speculative_config": self.config.json(),
            "paste": self.paste(),
            "choices": [asdict(c) for c in self.schedule.choices],
        }


def study_schedules(
    speedups: list, cell_axes: dict[str, dict[str, str]], cell_k: dict[str, int | None], config: dict[str, Any]
) -> list[StudySchedule]:
    """``speedups`` (analysis.speedup.Speedup) of one run, each cell's axes and k, and the run's
    ``resolved_config``: the schedules, [] when the study does not cross concurrency."""
    spec = (config.get("serve") or {}).get("speculative") or {}
    static_k = spec.get("num_speculative_tokens")
    groups: dict[tuple, list[Point]] = {}
    for s in speedups:
        axes = cell_axes.get(s.cell) or {}
        k = cell_k.get(s.cell) or _int(axes.get(K_AXIS)) or _int(static_k)
        c = _int(axes.get(CONCURRENCY))
        ci = s.intervals.get("output_tok_per_s")
        point = s.point.get("output_tok_per_s")
        if c is None or k is None or ci is None or point is None:
            continue
        rest = tuple(sorted((a, v) for a, v in axes.items() if a not in (CONCURRENCY, K_AXIS)))
        groups.setdefault(rest, []).append(Point(c, k, float(point), (float(ci[0]), float(ci[1])), s.cell))
    out = []
    for rest, points in groups.items():
        if len({p.concurrency for p in points}) < 2:
            continue
        schedule = derive(points)
        passed = _fields(spec, config.get("matrix") or {}, dict(rest))
        cfg = ServingConfig(spec.get("method", "eagle"), spec.get("draft"), schedule, passed)
        out.append(StudySchedule(dict(rest), cfg))
    return out


# serve.speculative's own keys (specbench's), the rest being vLLM SpeculativeConfig fields passed through
_OWN = ("method", "draft", "drafts", "num_speculative_tokens")


def _fields(spec: dict[str, Any], matrix: dict[str, list], axes: dict[str, str]) -> dict[str, SpecValue]:
    """The vLLM speculative-config fields the setting ran with: serve.speculative's passed-through
    ones and its ``speculative:FIELD`` axes' values (typed as the matrix wrote them)."""
    out = {k: v for k, v in spec.items() if k not in _OWN}
    for key, values in matrix.items():
        if not str(key).startswith("speculative:"):
            continue
        name = str(key).split(":", 1)[1]
        shown = axes.get(name)
        typed = [v for v in values if _slug(v) == shown]
        if typed:
            out[name] = typed[0]
    return out


def _slug(value: Any) -> str:
    # how a cell's axes hold a value (cell.json), as text
    if value is None:
        return UNSET
    return list_value_text(value) if isinstance(value, list) else str(value)


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def schedule_json(schedules: list[StudySchedule]) -> str:
    return json.dumps({"schedules": [s.to_dict() for s in schedules]}, indent=2) + "\n"


def schedule_markdown(schedules: list[StudySchedule]) -> list[str]:
    """summary.md's section: per setting, the schedule, why each range got its K, the line to paste."""
    if not schedules:
        return []
    out = [
        "## Dynamic K: the schedule the speed-ups support",
        "",
        "At each measured concurrency, the k with the highest output tok/s speed-up among those whose 95% interval "
        "lies above 1, else K = 0 (no speculation); concurrency stands in for the batch size. `schedule.json` has "
        "each as vLLM's `num_speculative_tokens_per_batch_size`.",
        "",
    ]
    for s in schedules:
        where = ", ".join(f"{a} {v}" for a, v in s.axes.items()) or "the study"
        out.append(f"**{where}**: `{json.dumps(s.schedule.entries)}`")
        out += [f"- concurrency {c.concurrency}: K = {c.k} ({c.why})" for c in s.schedule.choices]
        if not s.schedule.max_k:
            out += ["", "Speculation is known to pay at no measured concurrency here: serve without it.", ""]
            continue
        ref = s.config.model or ""
        out += ["", f"```\n{s.paste()}\n```", ""]
        if ref.startswith("fixture:"):
            out += [f"(`{ref}` is specbench's; `specbench fixtures path` gives the directory vLLM takes.)", ""]
    return out


SCHEDULE_FIELD = "num_speculative_tokens_per_batch_size"


@dataclass
class ServedSchedule:
    """A speculative cell that ran with a dynamic-K schedule: the schedule, and the K vLLM reported
    for each verify step against the K the schedule gives at the cell's concurrency."""

    cell: str
    entries: list[list[int]]
    concurrency: int | None
    ran: StepK

    def line(self) -> str:
        at = f" at concurrency {self.concurrency}" if self.concurrency is not None else ""
        return f"{self.cell}: schedule `{json.dumps(self.entries)}`{at}; {self.ran.line()}"


def served_schedules(cells: list, config: dict[str, Any]) -> list[ServedSchedule]:
    """Each speculative cell (baseline_pairs.CellRequests) whose vLLM speculative config held a
    schedule (a ``speculative:num_speculative_tokens_per_batch_size`` axis value or
    ``serve.speculative``'s), with what its requests' per-step counts say it ran."""
    serve = config.get("serve") or {}
    spec = serve.get("speculative") or {}
    load = config.get("load") or {}
    k, max_batch = _int(spec.get("num_speculative_tokens")), _int(serve.get("max_num_seqs"))
    out = []
    for c in cells:
        if c.is_baseline:
            continue
        shown = c.axes.get(SCHEDULE_FIELD)
        entries = spec.get(SCHEDULE_FIELD) if shown is None else (None if shown == UNSET else json.loads(shown))
        if not entries:
            continue
        conc = _int(c.axes.get(CONCURRENCY, load.get("concurrency")))
        cell_k = _int(c.axes.get(K_AXIS)) or k
        expected = None
        if conc is not None and cell_k:
            expected = lookup(entries, max(max_batch or conc, conc), cell_k)[conc]
        # vLLM leaves a request's per-step arrays out when no step of it drafted (K = 0 all along):
        # with any request carrying them (detailed metrics), the others drafted nothing
        rows = [r for r in c.rows if r.output_tokens and r.error is None]
        if not any(r.spec_decode is not None and r.spec_decode.per_step_drafted is not None for r in rows):
            rows = []  # no per-step counts at all: unchecked
        drafted = [_per_step(r, "per_step_drafted") for r in rows]
        plain = sum(
            plain_steps(r.output_tokens, len(d), sum(_per_step(r, "per_step_accepted"))) for r, d in zip(rows, drafted)
        )
        out.append(ServedSchedule(c.label, entries, conc, step_k(drafted, expected, plain)))
    return out


def _per_step(row: Any, name: str) -> list[int]:
    return list(getattr(row.spec_decode, name, None) or []) if row.spec_decode is not None else []


def served_markdown(served: list[ServedSchedule]) -> list[str]:
    """summary.md's section on the schedules a study served, each attested by vLLM's per-step counts."""
    if not served:
        return []
    bad = [s for s in served if s.ran.status == "differs"]
    unchecked = [s for s in served if s.ran.status == "unchecked"]
    head = (
        f"{len(served) - len(bad) - len(unchecked)} of {len(served)} cells ran with the K their schedule gives at "
        "their concurrency for most verify steps (vLLM's per-request `per_step_drafted`, "
        "`per_request_metrics: detailed`)"
    )
    if bad:
        head += f"; {len(bad)} did not: {', '.join(s.cell for s in bad)}"
    if unchecked:
        head += f"; {len(unchecked)} unchecked (no per-step counts from vLLM)"
    return (
        ["## Dynamic K: the schedules served, attested", "", head + ".", ""] + [f"- {s.line()}" for s in served] + [""]
    )

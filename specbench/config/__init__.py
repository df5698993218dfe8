"""The study config: strict pydantic models and ``load_config(path) -> Study``.

A typo in YAML must be an error naming the file and the field path (``configs/x.yaml:
matrix.mla[1]: must be 'on' or 'off'``), never a silent default. YAML 1.1 reads bare ``on``/``off``
as booleans, so the on/off axes accept booleans and turn them back into ``"on"``/``"off"``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Callable, Literal, Optional, Sequence, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from specbench.analysis.stop_rule import MIN_REQUESTS_FLOOR, PRECISION_METRICS  # defined with the rule
from specbench.axis import ENV_NAME, SPEC_AXES, Axis, on_off, parse_axis
from specbench.config.limits import MAX_K, MAX_REPEATS, MAX_REQUESTS, MAX_TEMPERATURE
from specbench.config.overrides import apply_overrides, shown_override
from specbench.config.study_checks import check_study
from specbench.errors import ConfigError, SpecbenchError
from specbench.fixtures import FIXTURE_REFS  # the one definition (re-exported: run/cells, run/plan)
from specbench.io import read_bytes
from specbench.load.llmperf_checks import check_llmperf
from specbench.load.prompt_sets import CATEGORIES
from specbench.load.workloads import check_workload, workload_file
from specbench.safe_yaml import LimitError, load_yaml
from specbench.serve.installs import install_identity, parse_install

# owner/name as on the Hugging Face hub; anything else must be an existing local path.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
OUTPUT_NORM_VALUES = ("on", "off", "logits-only")
# Speculative methods whose draft is the served model's own MTP layer (vLLM 0.32 renamed
# deepseek_mtp to mtp and still accepts both): no separate draft model.
MTP_METHODS = ("deepseek_mtp", "mtp")
_METHOD = re.compile(r"^[a-z][a-z0-9_]*$")


# Field defaults are given as ``default=``: type checkers read only the keyword as a default (with
# a positional one, ``Field(default_factory=Load)`` no longer type-checks: Load() would need arguments).
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, strict=True)


def _on_off(value: Any, allowed: tuple[str, ...]) -> str:
    if isinstance(value, bool):
        value = on_off(value)
    if not isinstance(value, str) or value not in allowed:
        raise ValueError("must be " + " or ".join(repr(a) for a in allowed))
    return value


def _path_is(value: str, test: str) -> bool:
    # A name too long for the OS, or with a NUL, is simply not an existing path (not an OSError).
    try:
        return bool(getattr(Path(value).expanduser(), test)())
    except (OSError, ValueError, RuntimeError):
        return False


def check_model_ref(value: str) -> str:
    """A model is a fixture ref, an existing local directory, or a hub id ``owner/name``."""
    if not value.strip():
        raise ValueError("is empty; give a local model directory, a hub id like 'owner/name' or a fixture ref")
    if value in FIXTURE_REFS:
        return value
    if value.startswith("fixture:"):
        raise ValueError(f"unknown fixture {value!r}; use one of {', '.join(repr(r) for r in FIXTURE_REFS)}")
    if _path_is(value, "exists"):
        return value
    looks_local = value.startswith((".", "/", "~")) or value.count("/") != 1
    if looks_local or not _HUB_ID.match(value):
        raise ValueError(f"model path {value!r} does not exist (and is not a hub id like 'owner/name')")
    return value


# A value of a vLLM speculative-config field passed through (serve.speculative.FIELD or a
# speculative:FIELD axis): what JSON carries.
_JSON_SCALAR = (str, int, float, bool, type(None))


def _json_like(value: Any) -> bool:
    if isinstance(value, list):
        return all(_json_like(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v) for k, v in value.items())
    return isinstance(value, _JSON_SCALAR)


class Speculative(_Strict):
    """The speculative config. Any other field is one of vLLM's ``SpeculativeConfig``
    (``rejection_sample_method``, ``synthetic_acceptance_rates``, ...), passed through into the one
    ``--speculative-config`` JSON; its name is checked against the serving install's own class
    (config/study_checks.py and run/install_plan.py, via specbench/serve/spec_fields.py)."""

    model_config = ConfigDict(extra="allow", frozen=False, strict=True)

    method: str = "eagle"
    # The draft model (an EAGLE head, ...). For deepseek_mtp / mtp it may be left out: the draft is
    # the served model's own MTP layer. With a ``method`` axis it is the head of the non-MTP cells.
    draft: Optional[str] = None
    # The draft of each method that needs its own, where a method axis crosses heads of different
    # kinds (``{eagle3: fixture:heads-draft-eagle3}`` next to ``draft`` for eagle): method -> model.
    drafts: dict[str, str] = Field(default_factory=dict)
    num_speculative_tokens: int = Field(default=3, ge=1, le=MAX_K)

    _draft = field_validator("draft")(lambda cls, v: v if v is None else check_model_ref(v))

    @field_validator("drafts")
    @classmethod
    def _drafts(cls, v: dict[str, str]) -> dict[str, str]:
        for method, ref in v.items():
            if method in MTP_METHODS:
                raise ValueError(f"{method!r}: an MTP method drafts with the served model's own layer; leave it out")
            if not _METHOD.match(method):
                raise ValueError(f"{method!r} is not a vLLM speculative method name (eagle, eagle3, ...)")
            try:
                check_model_ref(ref)
            except ValueError as exc:
                raise ValueError(f"{method}: {exc}") from None
        return v

    @model_validator(mode="after")
    def _passed_through(self) -> "Speculative":
        for name, value in (self.model_extra or {}).items():
            if not _json_like(value):
                raise ValueError(f"{name}: must be a number, string, boolean, list or mapping (it goes into JSON)")
        return self

    @property
    def vllm_fields(self) -> dict[str, Any]:
        """The fields passed through to vLLM as written (every field but method, draft, drafts, k)."""
        return dict(self.model_extra or {})

    def draft_of(self, method: str) -> Optional[str]:
        """The draft model ``method`` runs with: its own from ``drafts``, else ``draft``."""
        return self.drafts.get(method, self.draft)

    @field_validator("method")
    @classmethod
    def _method_name(cls, v: str) -> str:
        if not _METHOD.match(v):
            raise ValueError(f"{v!r} is not a vLLM speculative method name (eagle, deepseek_mtp, ...)")
        return v


class Serve(_Strict):
    model: str
    served_model_name: Optional[str] = None
    speculative: Optional[Speculative] = None
    tensor_parallel_size: int = Field(default=1, ge=1)
    max_model_len: Optional[int] = Field(default=None, ge=16)
    max_num_seqs: Optional[int] = Field(default=None, ge=1)
    trust_remote_code: bool = False
    dtype: Optional[str] = None
    enforce_eager: bool = False
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    port: Optional[int] = Field(default=None, ge=1, le=65535)
    startup_timeout_s: float = Field(default=600, gt=0)
    # vLLM logs a SpecDecoding window per stats interval (default 10 s); short windows let the
    # runner see the window that closes after the load quickly.
    log_stats_interval_s: float = Field(default=1.0, gt=0, le=60)
    # Per-request spec-decode counts (vLLM --per-request-spec-decode-metrics, 0.32+): summary = the
    # per-request histogram; detailed = also the ordered accepted/drafted count of every verify step
    # (needed for common-prefix acceptance; costs two list appends per step in the scheduler and a
    # few hundred bytes in the final chunk); auto = detailed when the installed vLLM has the flag.
    per_request_metrics: Literal["auto", "detailed", "summary", "off"] = "auto"
    # Cells that differ only in load axes, or only in head variants of a DeepSeek head (EAGLE or MTP,
    # compiled or eager) on a loopback host, share one vLLM server (run/groups.py; a server whose
    # start-up probe says it cannot switch is restarted per variant). false: one server per cell, as before
    # (e.g. to measure start-to-start spread, or to rule sharing out).
    share_servers: bool = True

    _model = field_validator("model")(lambda cls, v: check_model_ref(v))

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return v

    @field_validator("extra_args")
    @classmethod
    def _no_host_port(cls, v: list[str]) -> list[str]:
        for arg in v:
            if arg.split("=", 1)[0] in ("--host", "--port"):
                raise ValueError("set serve.host / serve.port instead of passing --host/--port in extra_args")
        return v


class Prompts(_Strict):
    categories: Optional[list[str]] = None
    path: Optional[str] = None

    @model_validator(mode="after")
    def _one_source(self) -> "Prompts":
        if self.categories is not None and self.path is not None:
            raise ValueError("give either prompts.categories or prompts.path, not both")
        if self.path is not None and not _path_is(self.path, "is_file"):
            raise ValueError(f"prompt file {self.path!r} does not exist")
        return self


class Llmperf(_Strict):
    path: Optional[str] = None
    python: Optional[str] = None  # the interpreter of llmperf's own venv (it pins pydantic < 2.5)
    # None: derived from serve.max_model_len when set (half of what max_tokens leaves), else 550.
    mean_input_tokens: Optional[int] = Field(default=None, ge=1)
    # llmperf's --timeout is for the whole load (its per-request timeout is fixed at 180 s).
    # None: num_requests / concurrency rounds of 180 s each.
    test_timeout_s: Optional[int] = Field(default=None, gt=0)
    extra_args: list[str] = Field(default_factory=list)


# Statistics a precision-driven load can steer on (names as users write them -> the CI's key).
_POSITION_METRIC = re.compile(r"^p(\d+)$")  # p0, p1, ...: per-position acceptance (unconditional)


class Until(_Strict):
    """Stop the load once every named statistic's CI half-width is at most the given value."""

    ci_half_width: dict[str, float]

    @field_validator("ci_half_width")
    @classmethod
    def _metrics(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("name at least one statistic, e.g. {acceptance_length: 0.05}")
        for name, width in v.items():
            if name not in PRECISION_METRICS and not _POSITION_METRIC.match(name):
                raise ValueError(f"{name}: unknown statistic; use {', '.join(PRECISION_METRICS)} or p0, p1, ...")
            if isinstance(width, bool) or not isinstance(width, (int, float)) or not 0 < width < float("inf"):
                raise ValueError(f"{name}: the half-width must be a positive number (got {width!r})")
        return v


class Load(_Strict):
    driver: Literal["builtin", "llmperf"] = "builtin"
    num_requests: int = Field(default=20, ge=1)
    # Precision-driven load (specbench/load/precision.py): batches of `batch` requests until
    # `until` holds or `max_requests` were sent; the first check waits for `min_requests`.
    until: Optional[Until] = None
    max_requests: Optional[int] = Field(default=None, ge=2)
    batch: int = Field(default=10, ge=1)
    min_requests: int = Field(default=20, ge=2)
    concurrency: int = Field(default=4, ge=1)
    max_tokens: int = Field(default=64, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int = 0
    timeout_s: float = Field(default=300, gt=0)
    prompts: Prompts = Field(default_factory=Prompts)
    # Where prompts come from (specbench/load/workloads.py): builtin, mt-bench, sharegpt or jsonl:PATH.
    workload: str = "builtin"
    # max_tokens: every request asks for load.max_tokens; workload: for the length its workload's
    # sampler gives the prompt (ShareGPT's first reply, MT-bench's 256), load.max_tokens where none.
    output_len: Literal["max_tokens", "workload"] = "max_tokens"
    warmup_requests: int = Field(default=2, ge=0)
    # Speed-up measured in time with its baseline (specbench/run/interleave.py): each speculative
    # cell's load alternates with the same requests on its baseline's server in blocks of this many
    # requests (0: off; the baseline cell's own load, minutes away, is the reference).
    interleave: int = Field(default=0, ge=0)
    # A cell whose load fails more than this fraction of requests is recorded as failed.
    max_error_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    llmperf: Optional[Llmperf] = None

    @field_validator("workload")
    @classmethod
    def _workload(cls, v: str) -> str:
        check_workload(v)
        if workload_file(v) is not None and not _path_is(str(workload_file(v)), "is_file"):
            raise ValueError(f"prompt file {workload_file(v)!r} does not exist")
        return v

    @property
    def workload_name(self) -> str:
        """The workload this load sends: load.workload, or jsonl:PATH for a load.prompts.path."""
        return f"jsonl:{self.prompts.path}" if self.prompts.path is not None else self.workload

    @model_validator(mode="after")
    def _one_prompt_source(self) -> "Load":
        if self.workload != "builtin" and self.prompts.path is not None:
            raise ValueError(
                f"workload: {self.workload!r} and prompts.path name two prompt sources; keep one "
                "(a prompt file is workload jsonl:PATH)"
            )
        return self

    @model_validator(mode="after")
    def _until_needs_cap(self) -> "Load":
        if self.until is None:
            if self.max_requests is not None:
                raise ValueError("max_requests: only with load.until (a fixed load is load.num_requests)")
            return self
        if self.max_requests is None:
            raise ValueError("until: needs load.max_requests (the cap if the precision is never reached)")
        # Compared with the default: a run's manifest holds every field, num_requests included.
        if self.num_requests != type(self).model_fields["num_requests"].default:
            raise ValueError(
                "num_requests: remove it; with load.until the load size is decided by "
                "precision, capped by load.max_requests"
            )
        if self.driver != "builtin":
            raise ValueError("until: needs driver 'builtin' (llmperf cannot be sent in batches)")
        if self.min_requests < MIN_REQUESTS_FLOOR:
            raise ValueError(
                f"min_requests: {self.min_requests} is below {MIN_REQUESTS_FLOOR}; stopping on the CI's "
                "width after fewer requests leaves the final 95% CI covering the truth as little as 77% "
                f"of the time (docs/methods.md, Precision-driven load): use {MIN_REQUESTS_FLOOR} or more"
            )
        if self.min_requests > self.max_requests:
            raise ValueError(f"min_requests: {self.min_requests} is above max_requests {self.max_requests}")
        return self

    @model_validator(mode="after")
    def _interleave_alone(self) -> "Load":
        if self.interleave and self.driver != "builtin":
            raise ValueError(
                "interleave: needs driver 'builtin' (llmperf samples its own prompts, so no request pairs)"
            )
        if self.interleave and self.until is not None:
            raise ValueError("interleave: not with load.until (a precision-driven load); use num_requests")
        return self

    @model_validator(mode="after")
    def _llmperf_needs_path(self) -> "Load":
        if self.driver == "llmperf":
            if self.llmperf is None or not self.llmperf.path:
                raise ValueError("driver 'llmperf' needs load.llmperf.path (a clone of ray-project/llmperf)")
            try:
                check_llmperf(self.llmperf.path, self.llmperf.python or "python")
            except SpecbenchError as exc:
                raise ValueError(str(exc)) from None
            # What llmperf cannot be told: refuse rather than ignore (it builds prompts from its own
            # sonnet.txt with a fixed seed 11111, and times out each request after 180 s).
            # Compared with the defaults, not model_fields_set: a run's manifest holds every field.
            defaults = {n: f.default for n, f in type(self).model_fields.items()}
            if self.prompts.categories is not None or self.prompts.path is not None or self.workload != "builtin":
                raise ValueError(
                    "driver 'llmperf' builds its own prompts (sonnet lines, sized by "
                    "load.llmperf.mean_input_tokens); remove load.prompts and load.workload"
                )
            if self.seed != defaults["seed"]:
                raise ValueError("driver 'llmperf' seeds its prompt sampler itself (fixed 11111); remove load.seed")
            if self.timeout_s != defaults["timeout_s"]:
                raise ValueError(
                    "driver 'llmperf' fixes each request's timeout at 180 s; remove load.timeout_s "
                    "and bound the whole load with load.llmperf.test_timeout_s"
                )
        return self


class Baseline(_Strict):
    enabled: bool = True
    # env:/flag: matrix axes that only concern the draft: the baseline (no draft) does not vary on
    # them. Every other non-speculative axis changes the target, so it gets one baseline per value.
    draft_axes: list[str] = Field(default_factory=list)


class Assumed(_Strict):
    """What ``run --dry-run`` assumes where this machine has never measured a server's start-up or a
    load (a first run on a new node): stated, shown as assumed, never mixed with a measured figure."""

    startup_s: list[float]  # one server's cold start, [low, high] seconds
    output_tok_per_s: list[float]  # one cell's load: output tokens per second over its requests, [low, high]
    basis: str = Field(min_length=1)  # where the figures come from, printed beside them

    @field_validator("startup_s", "output_tok_per_s")
    @classmethod
    def _range(cls, v: list[float]) -> list[float]:
        if len(v) != 2 or not (0 < v[0] <= v[1] < float("inf")):
            raise ValueError(f"{v} is not a range: give [low, high] with 0 < low <= high")
        return v


Scalar = Union[str, int, float, bool]
# lists (of scalars, or of lists of scalars: a num_speculative_tokens_per_batch_size schedule) and
# null (the field left unset, vLLM's default): speculative: axes only
AxisValue = Union[None, Scalar, list[Union[Scalar, list[Scalar]]]]


class Study(_Strict):
    name: str = Field(min_length=1, max_length=64)
    serve: Serve
    matrix: dict[str, list[AxisValue]] = Field(default_factory=dict)
    load: Load = Field(default_factory=Load)
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS)
    baseline: Baseline = Field(default_factory=lambda: Baseline(enabled=False))
    # local: cells one after another; ray: cells as Ray tasks (specbench run --executor ray).
    executor: Literal["local", "ray"] = "local"
    # run --dry-run's wall time where nothing was measured here yet (docs/running.md)
    assume: Optional[Assumed] = None
    _axes: dict[str, Axis] = PrivateAttr(default_factory=dict)

    @property
    def axes(self) -> dict[str, Axis]:
        """The matrix's axes by their text, parsed once (the matrix's validation refused any that
        is not an axis): what every module that asks what an axis sets reads."""
        if list(self._axes) != list(self.matrix):
            self._axes = {a: parse_axis(a) for a in self.matrix}
        return self._axes

    results_dir: str = "results"

    @field_validator("name")
    @classmethod
    def _name_chars(cls, v: str) -> str:
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", v):
            raise ValueError("use letters, digits, '.', '_' and '-' only (it becomes part of the run id)")
        return v

    @field_validator("results_dir")
    @classmethod
    def _results_dir(cls, v: str) -> str:
        if not v.strip():  # " " would be a directory named by a blank in the current one
            raise ValueError("is empty or blank; give a directory (default: results)")
        return v

    @field_validator("baseline", mode="before")
    @classmethod
    def _baseline_bool(cls, v: Any) -> Any:
        return {"enabled": v} if isinstance(v, bool) else v

    @field_validator("matrix", mode="before")
    @classmethod
    def _matrix(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        out: dict[str, list[Any]] = {}
        for axis, values in v.items():
            parsed = parse_axis(axis)  # AxisError is a ValueError: it reads "matrix.<axis>: ..."
            if not isinstance(values, list) or not values:
                raise ValueError(f"{axis}: must be a non-empty list of values")
            out[axis] = [_axis_value(parsed, i, val) for i, val in enumerate(values)]
            if len(set(map(str, out[axis]))) != len(out[axis]):
                raise ValueError(f"{axis}: values repeat")
            if parsed == Axis("builtin", "vllm"):
                _distinct_installs(out[axis])
        return out

    @model_validator(mode="after")
    def _spec_axes_need_speculation(self) -> "Study":
        for axis in self.matrix:
            if (axis in SPEC_AXES or self.axes[axis].kind == "speculative") and self.serve.speculative is None:
                raise ValueError(f"matrix.{axis} needs serve.speculative (it varies the draft)")
        return self

    @model_validator(mode="after")
    def _interleave_is_local(self) -> "Study":
        # without baseline cells (baseline: false) it has nothing to pair: inert, as --dry-run shows
        n = self.load.interleave
        if n and self.executor == "ray":
            raise ValueError("load.interleave: needs executor 'local' (both servers on one machine)")
        values = [self.load.concurrency, *self.matrix.get("load:concurrency", [])]
        top = max((v for v in values if isinstance(v, int) and not isinstance(v, bool)), default=1)
        if n and n < top:
            raise ValueError(
                f"load.interleave: {n} is below concurrency {top}: a block of {n} requests never has {top} "
                f"in flight, so the cell would not run at its concurrency; use a multiple of it ({top}, {2 * top}, ...)"
            )
        return self

    @model_validator(mode="after")
    def _load_axes_fit_the_load(self) -> "Study":
        if "load:category" in self.matrix:
            if self.load.driver == "llmperf":
                raise ValueError("matrix.load:category: driver 'llmperf' builds its own prompts; remove the axis")
            if self.load.prompts.categories is not None:
                raise ValueError(
                    "matrix.load:category: give the categories either as this axis or in "
                    "load.prompts.categories, not both"
                )
            if "load:workload" in self.matrix:
                raise ValueError(
                    "matrix.load:category: each workload has its own categories; cross load:workload "
                    "with load.prompts.categories instead (report splits every cell by category)"
                )
            if self.load.prompts.path is None and self.load.workload == "builtin":
                for i, v in enumerate(self.matrix["load:category"]):
                    if v not in CATEGORIES:
                        raise ValueError(
                            f"matrix.load:category[{i}]: unknown prompt category {v!r}; built-in "
                            f"categories: {', '.join(CATEGORIES)} (or set load.prompts.path)"
                        )
        return self

    @model_validator(mode="after")
    def _workload_axis(self) -> "Study":
        values = self.matrix.get("load:workload")
        if values is None:
            return self
        if self.load.driver == "llmperf":
            raise ValueError("matrix.load:workload: driver 'llmperf' builds its own prompts; remove the axis")
        if self.load.prompts.path is not None:
            raise ValueError("matrix.load:workload: remove load.prompts.path (a prompt file is workload jsonl:PATH)")
        if "workload" in self.load.model_fields_set and self.load.workload != "builtin":
            raise ValueError(
                "matrix.load:workload: give the workloads either as this axis or in load.workload, not both"
            )
        for i, v in enumerate(values):
            path = workload_file(str(v))
            if path is not None and not _path_is(path, "is_file"):
                raise ValueError(f"matrix.load:workload[{i}]: prompt file {path!r} does not exist")
        return self

    def workload_names(self) -> list[str]:
        """The workloads the study's cells send: each load:workload value, else load.workload (a
        load.prompts.path is the workload jsonl:PATH)."""
        axis = self.matrix.get("load:workload")
        if axis:
            return [str(v) for v in axis]
        return [self.load.workload_name]

    @model_validator(mode="after")
    def _drafts_for_methods(self) -> "Study":
        spec = self.serve.speculative
        if spec is None:
            return self
        methods = self.matrix.get("method", [spec.method])
        needs_draft = [m for m in methods if m not in MTP_METHODS]
        missing = [m for m in needs_draft if spec.draft_of(str(m)) is None]
        if missing and "draft" not in self.matrix:
            where = "matrix.method" if "method" in self.matrix else "serve.speculative.method"
            raise ValueError(
                f"{where}: {missing[0]!r} needs serve.speculative.draft (its draft model) or "
                f"serve.speculative.drafts.{missing[0]}; only {' / '.join(MTP_METHODS)} draft with the served "
                "model's own layer"
            )
        unused = sorted(set(spec.drafts) - {str(m) for m in methods})
        if unused:
            raise ValueError(
                f"serve.speculative.drafts.{unused[0]}: no cell runs method {unused[0]!r} "
                f"(the study's methods: {', '.join(str(m) for m in methods)}); remove it or add the method"
            )
        if spec.drafts and "draft" in self.matrix:
            raise ValueError(
                "matrix.draft: serve.speculative.drafts already names each method's draft; use one or the other"
            )
        if "method" in self.matrix and "draft" in self.matrix and len(needs_draft) < len(methods):
            raise ValueError(
                "matrix.draft: an MTP method drafts with the served model's own layer, so crossing "
                "it with a draft axis repeats the same cells; use serve.speculative.draft"
            )
        return self

    @model_validator(mode="after")
    def _until_positions_exist(self) -> "Study":
        if self.load.until is None:
            return self
        if self.serve.speculative is None:
            raise ValueError("load.until: needs serve.speculative (it steers on acceptance statistics)")
        # The axis's values are integers (checked by _builtin_axis_value); int() says so to mypy.
        ks = [int(k) for k in self.matrix.get("num_speculative_tokens", []) if isinstance(k, (int, str, float))]
        k = min(ks or [self.serve.speculative.num_speculative_tokens])
        for name in self.load.until.ci_half_width:
            m = _POSITION_METRIC.match(name)
            if m and int(m.group(1)) >= k:
                raise ValueError(
                    f"load.until.ci_half_width.{name}: no such position with "
                    f"num_speculative_tokens {k} (p0 .. p{k - 1})"
                )
        return self

    @model_validator(mode="after")
    def _draft_axes_in_matrix(self) -> "Study":
        for i, axis in enumerate(self.baseline.draft_axes):
            if axis not in self.matrix or self.axes[axis].kind not in ("env", "flag"):
                raise ValueError(
                    f"baseline.draft_axes[{i}]: {axis!r} is not an env:/flag: axis of the matrix "
                    "(speculative axes are draft-only already; mla changes the target)"
                )
        return self

    @property
    def served_model_name(self) -> str:
        return self.serve.served_model_name or self.serve.model


def _axis_value(axis: Axis, i: int, value: Any) -> Any:
    where = f"{axis.text}[{i}]"
    if axis.kind == "load":
        return _load_axis_value(axis, where, value)
    if axis.kind == "env":
        if isinstance(value, bool):
            return "1" if value else "0"
        if not isinstance(value, (str, int, float)):
            raise ValueError(f"{where}: must be a string or number")
        return str(value)
    if axis.kind == "speculative":
        scalar = (str, int, float, bool)
        if value is None or isinstance(value, scalar):  # None: the field left unset in this cell
            return value
        if isinstance(value, list) and all(
            isinstance(v, scalar) or (isinstance(v, list) and all(isinstance(x, scalar) for x in v)) for v in value
        ):
            return value
        raise ValueError(
            f"{where}: must be a number, string, boolean, null (the field unset), a list of them "
            "or a list of such lists (a schedule)"
        )
    if value is None:
        raise ValueError(f"{where}: null is a value of a speculative: axis only (the field left unset)")
    if isinstance(value, list):
        raise ValueError(f"{where}: a list is a value of a speculative: axis only")
    if axis.kind == "flag":
        if axis.name in ("--host", "--port"):
            raise ValueError(f"{axis.text}: set serve.host / serve.port instead")
        if not isinstance(value, (str, int, float, bool)):
            raise ValueError(f"{where}: must be a string, number or boolean")
        return value
    return _builtin_axis_value(axis.name, where, value)


def _builtin_axis_value(name: str, where: str, value: Any) -> Any:
    if name == "mla":
        return _wrap(where, lambda: _on_off(value, ("on", "off")))
    if name == "output_norm":
        return _wrap(where, lambda: _on_off(value, OUTPUT_NORM_VALUES))
    if name == "pos0_mask":
        return _wrap(where, lambda: _on_off(value, ("off", "on")))
    if name == "method":
        if not isinstance(value, str) or not _METHOD.match(value):
            raise ValueError(f"{where}: must be a vLLM speculative method name (eagle, deepseek_mtp, ...)")
        return value
    if name == "num_speculative_tokens":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
            raise ValueError(f"{where}: must be an integer from 1 to {MAX_K}")
        return value
    if name == "vllm":
        return _vllm_axis_value(where, value)
    assert name == "draft", name  # parse_axis admits no other built-in
    if not isinstance(value, str):
        raise ValueError(f"{where}: must be a model path or hub id")
    return _wrap(where, lambda: check_model_ref(value))


def _vllm_axis_value(where: str, value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f"{where}: {value!r} reads as a number; write the version quoted, e.g. '0.31.0'")
    try:
        parse_install(value)
    except ConfigError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return str(value).strip()


def _distinct_installs(values: list[Any]) -> None:
    seen: dict[str, str] = {}
    for i, value in enumerate(values):
        same = install_identity(parse_install(value))
        if same in seen:
            raise ValueError(f"vllm[{i}]: {value!r} names the same install as {seen[same]!r}; give each install once")
        seen[same] = str(value)


def _load_axis_value(axis: Axis, where: str, value: Any) -> Any:
    if axis.name in ("concurrency", "max_tokens"):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REQUESTS:
            raise ValueError(f"{where}: must be a positive integer (at most {MAX_REQUESTS})")
        return value
    if axis.name == "temperature":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TEMPERATURE:
            raise ValueError(f"{where}: must be a number from 0 to {MAX_TEMPERATURE:g}")
        return float(value)
    if axis.name == "workload":
        return _wrap(where, lambda: check_workload(value))
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: must be a prompt category name")
    return value


def _wrap(where: str, fn: Callable[[], str]) -> str:
    try:
        return fn()
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


# Validators of these fields start their message with the sub-field they mean ("until: needs ...").
_NAMING_VALIDATORS = ("load", "load.until.ci_half_width")


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    loc = _loc(tuple(p for p in err["loc"] if not str(p).startswith(("function-", "constrained-"))))
    if err["type"] == "extra_forbidden":
        msg = "unknown field (check the spelling; see configs/default.yaml)"
    elif err["type"] == "missing":
        msg = "required field is missing"
    # Union errors on axis values carry the variant name in the location; the matrix validator
    # already named the axis, so keep only the path to it.
    loc = re.sub(r"\.(str|int|float|bool)$", "", loc)
    # The matrix validator names the axis (and index) at the start of its message.
    m = re.match(r"^(\S+?): (.*)$", msg)
    if loc == "matrix" and m:
        loc, msg = f"matrix.{m.group(1)}", m.group(2)
    elif loc in _NAMING_VALIDATORS and m and re.match(r"^[A-Za-z_][\w.]*$", m.group(1)):
        loc, msg = f"{loc}.{m.group(1)}", m.group(2)
    return f"{loc}: {msg}" if loc else msg


def parse_study(data: Any, source: str) -> Study:
    """Validate an already-loaded mapping; errors name ``source`` and the field path."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        study = Study.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_first_error(exc)}") from None
    check_study(study, source)  # collisions, NUL, host, bounds, matrix size
    return study


def read_config_bytes(path: Path) -> bytes:
    return read_bytes(path, "config file", missing="see configs/default.yaml for an example", error=ConfigError)


def load_config(path: Path, overrides: Sequence[str] = ()) -> Study:
    """Read and validate a study config; every error is one line naming the file and field.
    ``overrides`` (``key.path=value``, from ``--set``) are applied before validation."""
    raw = read_config_bytes(path)
    try:
        data = load_yaml(raw.decode("utf-8"))  # duplicate keys, alias bombs and runaway nesting refused
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; is this a YAML config?") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        kind = "" if isinstance(exc, LimitError) else "YAML syntax error: "
        raise ConfigError(f"{where}: {kind}{problem}") from None
    if overrides:
        shown = " ".join(shown_override(o) for o in overrides)
        return parse_study(apply_overrides(data, overrides), f"{path} with --set {shown}")
    return parse_study(data, str(path))


def config_sha256(path: Path) -> str:
    return hashlib.sha256(read_config_bytes(path)).hexdigest()


def packaged_default_config() -> Path:
    """The default study shipped inside the package (identical to configs/default.yaml)."""
    return Path(__file__).parents[1] / "configs" / "default.yaml"  # specbench/configs/

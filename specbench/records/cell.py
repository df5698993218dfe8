"""The typed parts of ``cell.json`` and ``manifest.json`` (:mod:`specbench.records.files` holds the files'
top-level models): what a cell asked for (:class:`Spec`), what vLLM said it ran (:class:`Attested`),
the load it ran (:class:`LoadSettings`), why a precision-driven load stopped (:class:`Precision`),
the server it shared and the baseline it alternated with.

Field order is the order specbench writes the keys (the committed baselines round-trip byte for
byte); unknown keys (a newer writer's, a plugin's) are kept and written back, as in every Record.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, PrivateAttr, StrictBool, StrictInt, StrictStr, model_validator
from typing_extensions import Self

from specbench.records.base import K, Num, Record


class Part(Record):
    """A nested part of a cell or manifest file: written back with its keys in the order it was
    read, because its writers differ in order (the plugin's JSON sorts keys, vLLM's engine line
    does not) and the committed files must round-trip byte for byte. Keys set later follow."""

    _order: Optional[tuple[str, ...]] = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: Any) -> Any:
        part = handler(data)
        if isinstance(data, dict):
            part._order = tuple(data)
        return part

    def dump(self) -> dict[str, Any]:
        return ordered_dump(self)

    def with_(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` set (new keys after the ones it has)."""
        return self.model_validate({**ordered_dump(self), **changes})


def ordered_dump(record: Record) -> dict[str, Any]:
    """``record.dump()`` with every nested :class:`Part` in the key order it was read in."""
    return _reordered(record, record.model_dump(exclude_unset=True, by_alias=True))


def _reordered(record: Record, dumped: dict[str, Any]) -> dict[str, Any]:
    for name, value in dumped.items():
        held = getattr(record, name, None)
        if isinstance(held, Record) and isinstance(value, dict):
            dumped[name] = _reordered(held, value)
        elif isinstance(held, list) and isinstance(value, list):
            dumped[name] = [_reordered(h, v) if isinstance(h, Record) else v for h, v in zip(held, value)]
        elif isinstance(held, dict) and isinstance(value, dict):
            dumped[name] = {
                k: _reordered(held[k], v) if isinstance(held.get(k), Record) else v for k, v in value.items()
            }
    order = getattr(record, "_order", None)
    if not order:
        return dumped
    return {**{k: dumped[k] for k in order if k in dumped}, **{k: v for k, v in dumped.items() if k not in order}}


class HeadVariant(Part):
    """A DeepSeek head's switches as a cell asks for them (``spec.head_variant``)."""

    output_norm: Optional[StrictStr] = None
    pos0_mask: Optional[StrictStr] = None
    control: Optional[StrictBool] = None


class WorkerHeadVariant(Part):
    """A head variant as the plugin read it back from a worker's draft module (its JSON has sorted
    keys): ``attested.head_variant``, and each worker's answer to an in-place switch."""

    control: Optional[StrictBool] = None
    output_norm: Optional[StrictStr] = None
    pos0_mask: Optional[StrictStr] = None
    switched_in_place: Optional[StrictBool] = None


class HeadSwitch(Part):
    """``cell.json`` ``head_variant``: the variant switched in place on a shared server, and what
    each worker answered (specbench/run/groups.py)."""

    output_norm: Optional[StrictStr] = None
    pos0_mask: Optional[StrictStr] = None
    switched_in_place: Optional[StrictBool] = None
    workers: list[WorkerHeadVariant] = Field(default_factory=list)


class VllmInstall(Part):
    """The install a ``vllm`` axis value names (specbench/serve/installs.py)."""

    value: Optional[StrictStr] = None
    requirement: Optional[StrictStr] = None
    record_sha256: Optional[StrictStr] = None


class Spec(Part):
    """What a cell claims to run (specbench/run/cells.py ``cell_spec``); checked against
    :class:`Attested` (specbench/serve/attest.py). ``num_speculative_tokens`` is k, as vLLM names it."""

    method: Optional[StrictStr] = None
    vllm_method: Optional[StrictStr] = None
    draft_model: Optional[StrictStr] = None
    num_speculative_tokens: Optional[K] = None
    head_variant: Optional[HeadVariant] = None
    mla: Optional[StrictBool] = None
    tp: Optional[StrictInt] = None
    dp: Optional[StrictInt] = None
    compiled: Optional[StrictBool] = None
    vllm_version: Optional[StrictStr] = None
    vllm_install: Optional[VllmInstall] = None
    rejection_sample_method: Optional[StrictStr] = None  # only where the config sets it


class Compilation(Part):
    mode: Optional[StrictStr] = None
    cudagraph_mode: Optional[StrictStr] = None
    enforce_eager: Optional[StrictBool] = None


class Attested(Part):
    """What the server itself printed it ran (specbench/serve/attest.py ``attest``); a field it did
    not print is None and named in ``unattested`` with the reason."""

    vllm_version: Optional[StrictStr] = None
    model_runner: Optional[StrictStr] = None
    attention_backend: Optional[StrictStr] = None
    mla: Optional[StrictBool] = None
    spec_method: Optional[StrictStr] = None
    draft_model: Optional[StrictStr] = None
    num_speculative_tokens: Optional[K] = None
    head_variant: Optional[WorkerHeadVariant] = None
    compilation: Optional[Compilation] = None
    chunked_prefill: Optional[StrictBool] = None
    prefix_caching: Optional[StrictBool] = None
    tp: Optional[StrictInt] = None
    dp: Optional[StrictInt] = None
    workers: Optional[StrictInt] = None
    speculation: Optional[StrictBool] = None
    runner_line: Optional[StrictStr] = None
    draft_class: Optional[StrictStr] = None
    draft_attention: Optional[list[StrictStr] | StrictStr] = None
    # vLLM's rejection sampling (standard / synthetic / block) and, for synthetic, the rates it
    # resolved and whose kernel ran it on CPU ("specbench-cpu": the plugin's; "vllm": vLLM's own)
    rejection_sample_method: Optional[StrictStr] = None
    synthetic_acceptance_rates: Optional[list[Num]] = None
    rejection_kernel: Optional[StrictStr] = None
    unattested: Optional[dict[str, StrictStr]] = None


class LoadSettings(Part):
    """The load a cell ran (``cell.json`` ``load``; its config is specbench/config ``Load``)."""

    driver: Optional[StrictStr] = None
    num_requests: Optional[StrictInt] = None
    concurrency: Optional[StrictInt] = None
    max_tokens: Optional[StrictInt] = None
    temperature: Optional[Num] = None
    category: Optional[StrictStr | list[StrictStr]] = None  # one category, or those the load mixed
    workload: Optional[StrictStr] = None
    output_len: Optional[StrictStr] = None  # "max_tokens" or "workload"
    warmup_requests: Optional[StrictInt] = None


class PrecisionLook(Part):
    """One look of the precision stop rule (specbench/load/precision.py ``run_until``): the requests
    sent so far, the CI units they made, and each target's half-width then (config names)."""

    requests: Optional[StrictInt] = None
    n_units: Optional[StrictInt] = None
    half_widths: dict[str, Optional[Num]] = Field(default_factory=dict)


class Precision(Part):
    """Why a precision-driven load stopped (specbench/load/precision.py ``Outcome``)."""

    reason: Optional[StrictStr] = None
    requests_sent: Optional[StrictInt] = None
    batches: Optional[StrictInt] = None
    unit: Optional[StrictStr] = None
    n_units: Optional[StrictInt] = None
    targets: dict[str, Num] = Field(default_factory=dict)
    half_widths: dict[str, Optional[Num]] = Field(default_factory=dict)
    looks: list[PrecisionLook] = Field(default_factory=list)
    confidence: Optional[Num] = None
    interval: Optional[StrictStr] = None


class PairedBaseline(Part):
    """``load.interleave`` (specbench/run/interleave.py): the baseline cell whose server this cell's
    load alternated with, the blocks, the companion's log, or why it could not start."""

    cell: Optional[StrictStr] = None
    server_log: Optional[StrictStr] = None
    startup_s: Optional[Num] = None
    prefix_cache_reset: Optional[StrictStr] = None
    block: Optional[StrictInt] = None
    blocks: Optional[StrictInt] = None
    order: Optional[StrictStr] = None
    requests: Optional[StrictInt] = None
    failed: Optional[StrictInt] = None
    error: Optional[StrictStr] = None


class ServerGroup(Part):
    """The server a cell shared with others (specbench/run/groups.py) and its slice of that log."""

    id: Optional[StrictStr] = None
    cells: list[StrictStr] = Field(default_factory=list)
    log: Optional[StrictStr] = None
    startup_s: Optional[Num] = None
    dev_mode: Optional[StrictBool] = None
    companion: Optional[StrictBool] = None  # started beside the speculative cells (load.interleave)
    index: Optional[StrictInt] = None
    log_lines: Optional[list[StrictInt]] = None
    head_switch_fallback: Optional[StrictStr] = None


class LogWindowWait(Part):
    matched: Optional[StrictBool] = None
    timeout_s: Optional[Num] = None
    after_line: Optional[StrictInt] = None


class ServerRequests(Part):
    """What the server's /metrics saw of an llmperf load: the diff of its request counters around
    the llmperf process (specbench/load/llmperf_account.py ``diff_server``)."""

    http_status: dict[str, StrictInt] = Field(default_factory=dict)  # HTTP status class ("2xx") -> requests
    sent: Optional[StrictInt] = None
    http_failed: Optional[StrictInt] = None
    finished: dict[str, StrictInt] = Field(default_factory=dict)  # vLLM's finished_reason -> requests
    completed: Optional[StrictInt] = None
    generation_tokens: Optional[StrictInt] = None
    prompt_tokens: Optional[StrictInt] = None


class LoadAccounting(Part):
    """llmperf (specbench/load/llmperf_account.py): requests asked, started, recorded, failed, and
    what the server's /metrics saw."""

    requested: Optional[StrictInt] = None
    llmperf_started: Optional[StrictInt] = None
    recorded: Optional[StrictInt] = None
    failed: Optional[StrictInt] = None
    dropped_failed: Optional[StrictInt] = None
    timed_out: Optional[StrictBool] = None  # past llmperf's whole-test timeout
    server: Optional[ServerRequests] = None
    server_not_recorded: Optional[StrictInt] = None
    acceptance_covers: Optional[StrictStr] = None
    llmperf_exit_status: Optional[StrictInt] = None
    server_span_s: Optional[Num] = None
    server_span_resolution_s: Optional[Num] = None


class Machine(Part):
    """The machine a run ran on (``manifest.json`` ``machine``)."""

    hostname: Optional[StrictStr] = None
    platform: Optional[StrictStr] = None
    python: Optional[StrictStr] = None
    cpu_model: Optional[StrictStr] = None
    cpu_count: Optional[StrictInt] = None
    memory_gib: Optional[Num] = None
    gpus: list[dict[str, StrictStr]] = Field(default_factory=list)


class WorkloadProvenance(Part):
    """Where a workload's prompts came from and how they were sampled (specbench/load/workloads.py
    ``Workload.provenance``): ``manifest.json`` ``workloads``, with the chat template the server applied
    (specbench/run/runner.py). Which fields are set depends on the workload."""

    source: Optional[StrictStr] = None  # builtin
    package: Optional[StrictStr] = None  # mt-bench, sharegpt: the data package, its version and file
    version: Optional[StrictStr] = None
    file: Optional[StrictStr] = None
    sha256: Optional[StrictStr] = None  # of the file's bytes
    sampler: Optional[StrictStr] = None
    seed: Optional[StrictInt] = None  # sharegpt: the sample's
    asked: Optional[StrictInt] = None
    complete_conversations: Optional[StrictInt] = None
    truncated_at_byte: Optional[StrictInt] = None
    non_utf8_entries: Optional[StrictInt] = None
    template: Optional[StrictStr] = None
    malformed: Optional[StrictInt] = None
    first_malformed: Optional[StrictStr] = None
    length_filtered: Optional[StrictInt] = None
    turn0_not_human: Optional[StrictInt] = None
    skipped: Optional[StrictInt] = None  # mt-bench: unusable question lines
    first_bad_line: Optional[StrictInt] = None
    workload: Optional[StrictStr] = None
    distinct_prompts: Optional[StrictInt] = None
    chat_template_sha256: Optional[StrictStr] = None
    chat_template_from: Optional[StrictStr] = None


class PreparedInstall(Part):
    """A ``vllm`` axis value's install as planning found it (specbench/run/install_plan.py):
    ``manifest.json`` ``installs``."""

    value: Optional[StrictStr] = None
    kind: Optional[StrictStr] = None  # current, version, requirement, path
    requirement: Optional[StrictStr] = None
    python: Optional[StrictStr] = None
    env_dir: Optional[StrictStr] = None
    created: Optional[StrictBool] = None
    create_s: Optional[Num] = None
    vllm_dist: Optional[StrictStr] = None
    vllm_version: Optional[StrictStr] = None
    record_sha256: Optional[StrictStr] = None
    vllm_root: Optional[StrictStr] = None
    ready_s: Optional[Num] = None


class GateSubset(Part):
    """``run --gate --gate-baseline``: the run sent the first ``prompts`` of the baseline's ``of``."""

    baseline_run_id: Optional[StrictStr] = None
    prompts: Optional[StrictInt] = None
    of: Optional[StrictInt] = None


class HeadSwitchFallback(Part):
    """A shared server whose head could not be switched in place (a server per variant ran)."""

    server: Optional[StrictStr] = None
    cells: list[StrictStr] = Field(default_factory=list)
    reason: Optional[StrictStr] = None

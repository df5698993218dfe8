"""Adapter for a user's ray-project/llmperf checkout, run as a subprocess in its own venv.

llmperf is not on PyPI (the PyPI name is an unrelated stub), pins pydantic < 2.5 (clashes with
vLLM) and loads a Llama tokenizer from the Hugging Face hub at import, so it runs from the user's
clone with the ``python`` of its own venv: ``token_benchmark_ray.py --llm-api openai`` with
``OPENAI_API_BASE=<url>/v1``. Its ``*_individual_responses.json`` becomes our request records,
so the rest of specbench treats both load generators alike.

What llmperf cannot give: per-token inter-token latencies (it records one value per request, total
time over chunks, under ``llmperf_inter_token_latency_s``; ``itl_s`` is None), per-request
acceptance (``spec_decode`` is None: use the /metrics diff), the generated text and token ids, and
the server's token counts (its counts come from its own tokenizer).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import subprocess
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.errors import DependencyError, InputError, SpecbenchError
from specbench.load.driver import LoadResult

SCRIPT = "token_benchmark_ray.py"


@dataclass
class LlmperfSpec:
    path: Path                    # the llmperf checkout (holds token_benchmark_ray.py)
    python: str                   # its venv's interpreter
    mean_input_tokens: int = 550
    stddev_input_tokens: int = 0
    mean_output_tokens: int = 150
    stddev_output_tokens: int = 0
    num_concurrent_requests: int = 1
    max_num_completed_requests: int = 10
    timeout_s: int = 600
    additional_sampling_params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0})
    extra_args: list[str] = field(default_factory=list)
    api_key: str | None = None    # the server's --api-key; passed as OPENAI_API_KEY, never written out


def results_name(model: str, mean_input_tokens: int, mean_output_tokens: int) -> str:
    """The file stem llmperf gives its results (``meta-llama-Llama-3-1-8B-Instruct_100_30``)."""
    stem = re.sub(r"[^\w\d-]+", "-", model)
    stem = re.sub(r"-{2,}", "-", stem)
    return f"{stem}_{mean_input_tokens}_{mean_output_tokens}"


def llmperf_argv(model: str, spec: LlmperfSpec, results_dir: Path) -> list[str]:
    return [
        spec.python, str(Path(spec.path) / SCRIPT), "--model", model, "--llm-api", "openai",
        "--mean-input-tokens", str(spec.mean_input_tokens),
        "--stddev-input-tokens", str(spec.stddev_input_tokens),
        "--mean-output-tokens", str(spec.mean_output_tokens),
        "--stddev-output-tokens", str(spec.stddev_output_tokens),
        "--num-concurrent-requests", str(spec.num_concurrent_requests),
        "--max-num-completed-requests", str(spec.max_num_completed_requests),
        "--timeout", str(spec.timeout_s),
        "--additional-sampling-params", json.dumps(spec.additional_sampling_params),
        "--results-dir", str(results_dir), *spec.extra_args,
    ]


def run_llmperf(base_url: str, model: str, spec: LlmperfSpec, results_dir: Path,
                log_path: Path | None = None) -> LoadResult:
    """Run llmperf against ``base_url`` and read its results; SpecbenchError with its tail on failure."""
    script = Path(spec.path) / SCRIPT
    if not script.is_file():
        raise DependencyError(
            f"{script} not found; git clone https://github.com/ray-project/llmperf and pass its path "
            "(with the python of a venv where it is installed)"
        )
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["OPENAI_API_BASE"] = base_url.rstrip("/") + "/v1"
    if spec.api_key:
        env["OPENAI_API_KEY"] = spec.api_key
    env.setdefault("OPENAI_API_KEY", "specbench-dummy-key")  # llmperf refuses to start without one
    log_path = Path(log_path) if log_path else results_dir / "llmperf.log"
    tail: deque[str] = deque(maxlen=30)
    with open(log_path, "w", encoding="utf-8", buffering=1) as log:
        proc = subprocess.Popen(llmperf_argv(model, spec, results_dir), cwd=spec.path, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        assert proc.stdout is not None
        try:
            for raw in iter(proc.stdout.readline, b""):
                line = raw.decode("utf-8", errors="replace")
                log.write(line)
                tail.append(line.rstrip("\n"))
            code = proc.wait()
        except BaseException:
            from specbench.procs import kill_tree

            kill_tree(proc)  # the whole group: llmperf's Ray workers too, not only its leader
            raise
    if code != 0:
        raise SpecbenchError(f"llmperf exited with status {code}; log {log_path}, last lines:\n" + "\n".join(tail))
    return read_llmperf_results(results_dir, results_name(model, spec.mean_input_tokens, spec.mean_output_tokens))


def read_llmperf_results(results_dir: Path, name: str | None = None) -> LoadResult:
    """Read ``<name>_summary.json`` and ``<name>_individual_responses.json`` into a LoadResult.

    With ``name`` None the directory must hold exactly one llmperf result pair.
    """
    results_dir = Path(results_dir)
    if name is None:
        found = sorted(p.name[: -len("_summary.json")] for p in results_dir.glob("*_summary.json"))
        if len(found) != 1:
            raise InputError(f"{results_dir}: expected one llmperf *_summary.json, found {len(found)}; name the run")
        name = found[0]
    summary = _read_json(results_dir / f"{name}_summary.json", dict)
    rows = _read_json(results_dir / f"{name}_individual_responses.json", list)
    requests = [_request(i, row, results_dir / f"{name}_individual_responses.json") for i, row in enumerate(rows)]
    completed = summary.get("results_num_completed_requests")
    per_min = summary.get("results_num_completed_requests_per_min")
    # llmperf does not save its duration; it is implied by its completed-per-minute rate.
    duration = float(completed) * 60.0 / float(per_min) if completed and per_min else 0.0
    ts = summary.get("timestamp")
    started = (_dt.datetime.fromtimestamp(float(ts) - duration, _dt.timezone.utc).isoformat(timespec="seconds")
               if ts else "")
    return LoadResult(requests=requests, started_at=started, duration_s=duration,
                      model=str(summary.get("model", "")), base_url="",
                      spec={"load_generator": "llmperf", "concurrency": summary.get("num_concurrent_requests"),
                            "mean_input_tokens": summary.get("mean_input_tokens"),
                            "max_tokens": summary.get("mean_output_tokens"),
                            "llmperf_name": name})


def _read_json(path: Path, kind: type) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: llmperf result file not found; was llmperf run with --results-dir here?") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable llmperf JSON file ({exc})") from None
    if not isinstance(data, kind):
        raise InputError(f"{path}: expected a JSON {kind.__name__}, got {type(data).__name__}")
    return data


def _request(i: int, row: Any, path: Path) -> dict[str, Any]:
    if not isinstance(row, dict) or "end_to_end_latency_s" not in row:
        raise InputError(f"{path}: entry {i} is not an llmperf response (no end_to_end_latency_s)")
    failed = row.get("error_code") is not None or bool(row.get("error_msg"))
    return {
        "id": i, "prompt_id": None, "category": "llmperf", "start_s": None,
        "ttft_s": _float(row.get("ttft_s")), "itl_s": None, "e2e_s": _float(row.get("end_to_end_latency_s")),
        "llmperf_inter_token_latency_s": _float(row.get("inter_token_latency_s")),
        "output_tokens": _int(row.get("number_output_tokens")), "input_tokens": _int(row.get("number_input_tokens")),
        "chunks": None, "text": None, "token_ids": None, "finish_reason": None, "itl_method": "llmperf_per_chunk",
        "error": (row.get("error_msg") or f"error {row.get('error_code')}") if failed else None,
        "error_code": row.get("error_code") if failed else None, "spec_decode": None,
    }


def _float(x: Any) -> float | None:
    try:
        return None if x is None else float(x)
    except (TypeError, ValueError):
        return None


def _int(x: Any) -> int | None:
    f = _float(x)
    return None if f is None or f != f else int(f)

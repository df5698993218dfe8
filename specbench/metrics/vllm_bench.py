"""``vllm bench serve`` result files (``--save-result``) -> canonical records and per-request rows.

Written against vLLM 0.32's ``vllm/benchmarks/serve.py``. A result file is one JSON object (several,
one per line, with ``--append-result``; a JSON list of them in a ``vllm bench sweep`` point's
``summary.json``). The keys read here:

- settings: ``date`` (``%Y%m%d-%H%M%S``, local time), ``backend``, ``label``, ``model_id``,
  ``tokenizer_id``, ``num_prompts``, ``request_rate`` (``"inf"`` or a number), ``burstiness``,
  ``max_concurrency``, plus any ``--metadata KEY=VALUE`` pairs as top-level keys (the dataset is
  not saved unless given that way);
- speculative decoding (present when the server exported ``vllm:spec_decode_*`` counters):
  ``spec_decode_num_drafts``, ``spec_decode_draft_tokens``, ``spec_decode_accepted_tokens``
  (differences of the /metrics counters taken around the benchmark), ``spec_decode_acceptance_length``
  (1 + accepted / drafts), ``spec_decode_acceptance_rate`` (percent) and
  ``spec_decode_per_position_acceptance_rates`` (fractions: per-position counter difference / drafts,
  unrounded floats);
- per request, only with ``--save-detailed``: ``ttfts``, ``itls`` (lists), ``output_lens``,
  ``input_lens``, ``start_times``, ``generated_texts``, ``errors`` (all seconds where timed);
  ``latencies`` is saved either way;
- summary latencies ``median_ttft_ms`` etc. and ``output_throughput`` (tokens/s over the run).

Per-position counts are not saved; they are reconstructed as ``rate x drafts`` only where that is a
whole number that divides back to the saved rate bit for bit (vLLM saves the unrounded quotient).
Otherwise (a rounded or hand-edited file) the record leaves ``accepted_per_position`` null and a
warning says so; analysis then rounds and labels the counts as derived.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from specbench.errors import InputError
from specbench.io import open_input, read_text
from specbench.metrics.record import SpecDecodeRecord
from specbench.records.counts import MAX_POSITIONS
from specbench.redact import redact_message
from specbench.safe_yaml import in_range

FORMAT = "vllm-bench-serve-json"
SPEC_KEYS = (
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "spec_decode_acceptance_length",
    "spec_decode_acceptance_rate",
    "spec_decode_per_position_acceptance_rates",
)
# Keys every `vllm bench serve` result of a generation benchmark carries (serve.py `result`).
_SIGNATURE = ("duration", "completed")
_ANY_OF = ("request_throughput", "total_input_tokens", "output_throughput")


@dataclass
class BenchResult:
    """One saved benchmark: the JSON object as written, and where it was read."""

    data: dict[str, Any]
    file: str
    line: int  # 1-based line where the object starts

    @property
    def has_spec_decode(self) -> bool:
        return any(k in self.data for k in SPEC_KEYS)


def is_bench_result(obj: Any) -> bool:
    return isinstance(obj, dict) and all(k in obj for k in _SIGNATURE) and any(k in obj for k in _ANY_OF)


def sniff(head: str) -> bool:
    """Cheap test on a file's first bytes: JSON that names vllm bench serve's result keys."""
    s = head.lstrip()
    return (
        s[:1] in ("{", "[")
        and '"duration"' in head
        and '"completed"' in head
        and any(f'"{k}"' in head for k in _ANY_OF + ("backend", "endpoint_type"))
    )


def looks_like_bench_file(path: Path | str) -> bool:
    try:
        fh, _ = open_input(path)  # a FIFO or device is not opened: it is no result file
    except InputError:
        return False
    with fh:
        head = fh.read(65536).decode("utf-8", "replace")
    return sniff(head)


def read_bench_file(path: Path | str) -> list[BenchResult]:
    """Every result object in ``path``; InputError naming the file when it is not such a file."""
    path = Path(path)

    text = read_text(path, errors="replace")
    name = redact_message(str(path))  # a result's file, as every output shows it
    out = [BenchResult(obj, name, line) for obj, line in _objects(text, path) if is_bench_result(obj)]
    if not out:
        raise InputError(
            f"{path}: JSON without vllm bench serve result keys (duration, completed, "
            "request_throughput); pass a file written by `vllm bench serve --save-result`"
        )
    return out


def _objects(text: str, path: Path) -> Iterator[tuple[Any, int]]:
    # --append-result writes one object per line into the same file; a sweep's summary.json is a list.
    dec = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        line = text.count("\n", 0, pos) + 1
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{path}:{exc.lineno}: corrupt or truncated JSON ({exc.msg}); re-run vllm bench "
                "serve or pass another file"
            ) from None
        if isinstance(obj, list):
            for item in obj:
                yield item, line
        else:
            yield obj, line


def _int(data: dict[str, Any], key: str, where: str, warnings: list[str]) -> int | None:
    v = data.get(key)
    if v is None:
        return None
    _finite(v, key, where)  # NaN and infinities are refused there
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or int(v) != v:
        warnings.append(f"{where}: {key} = {v!r} is not a count; ignored")
        return None
    return int(v)


def _finite(v: Any, key: str, where: str) -> None:
    """A spec-decode number no vLLM writes (NaN, an infinity, 1e400 read as one, past 10^15) is a
    damaged file, refused naming it, never read as absent."""
    # not <= rather than >: NaN, infinities and 10**400 fail the comparison too
    if isinstance(v, (int, float)) and not isinstance(v, bool) and not abs(v) <= 1e15:
        raise InputError(
            f"{where}: {key} = {v!r} is not a finite count or rate; fix the file or re-run vllm bench serve"
        )


def _float(data: dict[str, Any], key: str, where: str | None = None) -> float | None:
    v = data.get(key)
    if where is not None:
        _finite(v, key, where)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not in_range(v):
        return None
    return float(v)


def per_position_counts(rates: list[float], drafts: int) -> tuple[list[int] | None, list[int]]:
    """(counts, inexact positions): ``round(r * D)`` where it divides back to ``r`` exactly."""
    counts, inexact = [], []
    for i, r in enumerate(rates):
        c = round(r * drafts)
        if not 0 <= c <= drafts or c / drafts != r:
            inexact.append(i)
        counts.append(c)
    return (None if inexact else counts), inexact


def spec_record(res: BenchResult) -> tuple[SpecDecodeRecord | None, list[str]]:
    """The canonical record of one result (None without ``spec_decode_*`` keys) and its warnings."""
    d, where = res.data, f"{res.file}:{res.line}"
    warnings: list[str] = []
    if not res.has_spec_decode:
        return None, []
    drafts = _int(d, "spec_decode_num_drafts", where, warnings)
    rates_raw = d.get("spec_decode_per_position_acceptance_rates")
    if isinstance(rates_raw, list) and len(rates_raw) > MAX_POSITIONS:
        raise InputError(
            f"{where}: spec_decode_per_position_acceptance_rates has {len(rates_raw):,} positions, more than "
            f"{MAX_POSITIONS} (no draft proposes that many); fix the file or re-run vllm bench serve"
        )
    for r in rates_raw if isinstance(rates_raw, list) else []:
        _finite(r, "spec_decode_per_position_acceptance_rates", where)
    rates: list[float] | None = None
    if (
        isinstance(rates_raw, list)
        and rates_raw
        and all(isinstance(r, (int, float)) and not isinstance(r, bool) and in_range(r) for r in rates_raw)
    ):
        rates = [float(r) for r in rates_raw]
    elif rates_raw not in (None, []):
        warnings.append(
            f"{where}: spec_decode_per_position_acceptance_rates = {rates_raw!r} is not a list of fractions; ignored"
        )
    pos_counts = None
    if rates is not None and drafts:
        pos_counts, inexact = per_position_counts(rates, drafts)
        if inexact:
            shown = ", ".join(f"{rates[i]!r} x {drafts} = {rates[i] * drafts:.4f} (position {i})" for i in inexact[:4])
            warnings.append(
                f"{where}: per-position counts are not exact: rate x drafts is {shown}, not a whole "
                "number dividing back to the saved rate (a rounded or edited file); accepted_per_position "
                "left null, analysis rounds it and marks it derived"
            )
    dar = _float(d, "spec_decode_acceptance_rate", where)
    rec = SpecDecodeRecord(
        source="vllm-bench-serve",
        format=FORMAT,
        file=res.file,
        line=res.line,
        time=str(d["date"]) if d.get("date") is not None else None,
        cumulative=True,
        num_drafts=drafts,
        draft_tokens=_int(d, "spec_decode_draft_tokens", where, warnings),
        accepted_tokens=_int(d, "spec_decode_accepted_tokens", where, warnings),
        accepted_per_position=pos_counts,
        per_position_acceptance=rates,
        mean_acceptance_length=_float(d, "spec_decode_acceptance_length", where),
        draft_acceptance_rate=None if dar is None else dar / 100.0,
    )
    warnings += _consistency(rec, where)
    return rec, warnings


def _consistency(rec: SpecDecodeRecord, where: str) -> list[str]:
    """vLLM computes AL and the rate from the counts it saves: say when a file disagrees with itself."""
    out = []
    d, t, a = rec.num_drafts, rec.draft_tokens, rec.accepted_tokens
    if d and a is not None and rec.mean_acceptance_length is not None:
        if not math.isclose(1 + a / d, rec.mean_acceptance_length, rel_tol=1e-9):
            out.append(
                f"{where}: spec_decode_acceptance_length {rec.mean_acceptance_length} != 1 + accepted/drafts "
                f"= {1 + a / d:.6f}; the counts are used"
            )
    if t and a is not None and rec.draft_acceptance_rate is not None:
        if not math.isclose(a / t, rec.draft_acceptance_rate, rel_tol=1e-9):
            out.append(
                f"{where}: spec_decode_acceptance_rate {rec.draft_acceptance_rate * 100}% != accepted/draft "
                f"tokens = {100 * a / t:.4f}%; the counts are used"
            )
    return out


def records_from_file(path: Path | str) -> tuple[list[SpecDecodeRecord], list[str]]:
    """``parse``'s view of a result file: one record per result carrying spec-decode keys."""
    records, warnings = [], []
    results = read_bench_file(path)
    for res in results:
        rec, w = spec_record(res)
        warnings += w
        if rec is not None:
            records.append(rec)
    if not records:
        warnings.append(
            f"{path}: vllm bench serve result without spec_decode_* keys (the server ran without "
            "speculative decoding, its /metrics was unreachable, or vLLM predates these keys)"
        )
    return records, warnings


def request_rows(res: BenchResult) -> tuple[list[dict[str, Any]], list[str]]:
    """Per-request rows in specbench's ``requests.jsonl`` keys (seconds), from the saved arrays.

    With ``--save-detailed``: ttft, inter-token gaps, e2e, token counts, text and error per request.
    vLLM's gaps are per streamed chunk (``itl_method: per_chunk``): under speculation a chunk
    often carries several tokens, so they are longer than specbench's per-token ITL.
    Without it only ``latencies`` is saved, and without ``errors`` a failed request cannot be told
    apart: then the rows are used only when the file says no request failed.
    """
    d, where = res.data, f"{res.file}:{res.line}"
    lat = d.get("latencies")
    n = len(lat) if isinstance(lat, list) else len(d["ttfts"]) if isinstance(d.get("ttfts"), list) else 0
    if not n:
        return [], []
    errors = d.get("errors") if isinstance(d.get("errors"), list) else None
    if errors is None and (d.get("failed") or 0) > 0:
        return [], [
            f"{where}: {d.get('failed')} request(s) failed and the file has no per-request errors "
            "(saved without --save-detailed): per-request latencies not used"
        ]

    def col(key: str) -> list[Any] | None:
        v = d.get(key)
        return v if isinstance(v, list) and len(v) == n else None

    cols = {
        key: col(src)
        for key, src in (
            ("start_s", "start_times"),
            ("ttft_s", "ttfts"),
            ("itl_s", "itls"),
            ("e2e_s", "latencies"),
            ("output_tokens", "output_lens"),
            ("input_tokens", "input_lens"),
            ("text", "generated_texts"),
        )
    }
    rows = []
    for i in range(n):
        row: dict[str, Any] = {"id": i}
        for key, values in cols.items():
            if values is not None:
                row[key] = values[i]
        row["error"] = (errors[i] or None) if errors is not None and i < len(errors) else None
        if "itl_s" in row:
            row["itl_method"] = "per_chunk"  # one gap per streamed chunk, which may carry several tokens
        rows.append(row)
    return rows, []


def summary(res: BenchResult) -> dict[str, Any]:
    """The result's run-level figures under the llmperf ``summary.json`` keys specbench reads."""
    d, out = res.data, {}
    for key, src, scale in (
        ("results_ttft_s_quantiles_p50", "median_ttft_ms", 1e-3),
        ("results_ttft_s_quantiles_p99", "p99_ttft_ms", 1e-3),
        ("results_inter_token_latency_s_quantiles_p50", "median_itl_ms", 1e-3),
        ("results_end_to_end_latency_s_quantiles_p50", "median_e2el_ms", 1e-3),
        ("results_mean_output_throughput_token_per_s", "output_throughput", 1.0),
        ("results_num_completed_requests", "completed", 1),
        ("results_number_errors", "failed", 1),
    ):
        v = _float(d, src)
        if v is not None:
            out[key] = v * scale
    return out


# Provenance: result key -> (where it goes in a specbench manifest's resolved_config, label).
PROVENANCE = (
    ("model_id", ("serve", "model"), "model"),
    ("tokenizer_id", ("load", "tokenizer"), "tokenizer"),
    ("backend", ("load", "backend"), "backend"),
    ("dataset", ("load", "dataset"), "dataset"),  # only when passed as --metadata dataset=...
    ("dataset_name", ("load", "dataset"), "dataset"),
    ("num_prompts", ("load", "num_requests"), "prompts"),
    ("max_concurrency", ("load", "concurrency"), "max concurrency"),
    ("request_rate", ("load", "request_rate"), "request rate"),
    ("burstiness", ("load", "burstiness"), "burstiness"),
)


def provenance(data: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's own settings, keyed as in :data:`PROVENANCE` (absent keys left out)."""
    return {key: data[key] for key, _, _ in PROVENANCE if key in data}


def describe(data: dict[str, Any]) -> str:
    """``date 20261203-131502, model tiny, 12 prompts, ...``: one line of what the file says it ran."""
    parts = [f"date {data['date']}"] if data.get("date") else []
    parts += [f"{label} {data[key]}" for key, _, label in PROVENANCE if data.get(key) is not None]
    return ", ".join(parts)

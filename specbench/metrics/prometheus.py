"""Prometheus exposition text (a /metrics scrape) → canonical records, via prometheus_client's parser.

- ``prometheus-v1``: counters ``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
  ``..._num_accepted_tokens_total``, ``..._num_accepted_tokens_per_pos_total{position=...}``; one record per
  ``engine`` label value. Counters are cumulative since the server started: diff two scrapes.
- ``prometheus-v0``: gauges ``vllm:spec_decode_draft_acceptance_rate``, ``vllm:spec_decode_efficiency`` and
  counters ``vllm:spec_decode_num_{accepted,draft,emitted}_tokens_total``.
``*_created`` samples (counter creation timestamps) are ignored.
"""

from __future__ import annotations

import math
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

from specbench.metrics.record import SpecDecodeRecord

V1_COUNTERS = {
    "vllm:spec_decode_num_drafts_total": "num_drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
    "vllm:spec_decode_num_emitted_tokens_total": "emitted_tokens",
}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
V0_GAUGES = {
    "vllm:spec_decode_draft_acceptance_rate": "draft_acceptance_rate",
    "vllm:spec_decode_efficiency": "system_efficiency",
}


def looks_like_prometheus(text: str) -> bool:
    head = text[:4096]
    return "# TYPE " in head or "# HELP " in head or head.lstrip().startswith("vllm:")


def parse_prometheus(text: str, file: str | None = None) -> list[SpecDecodeRecord]:
    """One record per engine that exports spec-decode metrics; malformed exposition text → []."""
    by_engine: dict[str | None, dict[str, object]] = defaultdict(dict)
    positions: dict[str | None, dict[int, int]] = defaultdict(dict)
    try:
        for family in text_string_to_metric_families(text):
            if not family.name.startswith("vllm:spec_decode"):
                continue
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue
                engine = sample.labels.get("engine")
                value = sample.value
                if not math.isfinite(value):  # NaN / ±Inf (a broken exporter, a damaged file) → field stays null
                    continue
                if sample.name == PER_POS:
                    try:
                        positions[engine][int(sample.labels["position"])] = int(value)
                    except (KeyError, ValueError):
                        continue
                elif sample.name in V1_COUNTERS:
                    by_engine[engine][V1_COUNTERS[sample.name]] = int(value)
                elif sample.name in V0_GAUGES:
                    by_engine[engine][V0_GAUGES[sample.name]] = float(value)
    except (ValueError, TypeError, IndexError, KeyError):
        return []
    records = []
    for engine in sorted(set(by_engine) | set(positions), key=lambda e: (e is None, str(e))):
        values = dict(by_engine.get(engine, {}))
        pos = positions.get(engine)
        if pos and sorted(pos) == list(range(len(pos))):
            values["accepted_per_position"] = [pos[i] for i in range(len(pos))]
        fmt = "prometheus-v1" if "num_drafts" in values or "accepted_per_position" in values else "prometheus-v0"
        records.append(SpecDecodeRecord(
            source="prometheus", format=fmt, file=file, line=None, engine=_engine_id(engine), cumulative=True,
            **values,  # type: ignore[arg-type]
        ))
    return records


def _engine_id(label: str | None) -> int | None:
    if label is None:
        return None
    try:
        return int(label)
    except ValueError:
        return None

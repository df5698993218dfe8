"""Prometheus exposition text (a /metrics scrape) → canonical records, via prometheus_client's parser.

- ``prometheus-v1``: counters ``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
  ``..._num_accepted_tokens_total``, ``..._num_accepted_tokens_per_pos_total{position=...}``; one record per
  ``engine`` label value. Counters are cumulative since the server started: diff two scrapes.
- ``prometheus-v0``: gauges ``vllm:spec_decode_draft_acceptance_rate``, ``vllm:spec_decode_efficiency`` and
  counters ``vllm:spec_decode_num_{accepted,draft,emitted}_tokens_total``.
``*_created`` samples (counter creation timestamps) are ignored.

One record per **series**: a series is keyed by its full label set minus ``position`` (which
indexes the per-position counter) and the labels a Prometheus server adds at scrape time
(``instance``, ``job``); a label only some spec-decode families carry is left out of the key, so
the families of one engine still meet in one record. Two series that share an ``engine`` label but differ in another label
(``model_name``, a data-parallel rank) are two records, never one overwriting the other; summing
the records of a scrape sums its engines.
"""

from __future__ import annotations

from collections import defaultdict

from specbench.metrics.record import SpecDecodeRecord
from specbench.safe_yaml import in_range

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
    return "# TYPE " in head or "# HELP " in head or head.lstrip().startswith("vllm:") or "\nvllm:" in head


SCRAPE_LABELS = frozenset({"instance", "job"})

SeriesKey = tuple[tuple[str, str], ...]


def series_key(labels: dict[str, str], names: frozenset[str] | None = None) -> SeriesKey:
    """A series' identity: its labels minus ``position`` and scrape-time labels (only ``names`` if given)."""
    return tuple(
        sorted(
            (k, v)
            for k, v in labels.items()
            if k != "position" and k not in SCRAPE_LABELS and (names is None or k in names)
        )
    )


def parse_prometheus(text: str, file: str | None = None) -> list[SpecDecodeRecord]:
    """One record per series exporting spec-decode metrics (see the module docstring); malformed
    exposition text → []."""
    # Imported here: prometheus_client costs ~0.1 s at import, which `specbench parse` of a log
    # would pay for nothing.
    from prometheus_client.parser import text_string_to_metric_families

    by_series: dict[SeriesKey, dict[str, object]] = defaultdict(dict)
    positions: dict[SeriesKey, dict[int, int]] = defaultdict(dict)
    try:
        samples = [
            s
            for family in text_string_to_metric_families(text)
            if family.name.startswith("vllm:spec_decode")
            for s in family.samples
            if not s.name.endswith("_created")
        ]
    except (ValueError, TypeError, IndexError, KeyError):
        return []
    names = frozenset.intersection(*[frozenset(s.labels) for s in samples]) if samples else frozenset()
    for sample in samples:
        key = series_key(sample.labels, names)
        value = sample.value
        if not in_range(value):  # NaN / ±Inf / 10^400 (a broken exporter, a damaged file) → field stays null
            continue
        if sample.name == PER_POS:
            try:
                positions[key][int(sample.labels["position"])] = int(value)
            except (KeyError, ValueError):
                continue
        elif sample.name in V1_COUNTERS:
            by_series[key][V1_COUNTERS[sample.name]] = int(value)
        elif sample.name in V0_GAUGES:
            by_series[key][V0_GAUGES[sample.name]] = float(value)
    records = []
    for key in sorted(
        set(by_series) | set(positions), key=lambda k: (dict(k).get("engine") is None, str(dict(k).get("engine")), k)
    ):
        values = dict(by_series.get(key, {}))
        pos = positions.get(key)
        if pos and sorted(pos) == list(range(len(pos))):
            values["accepted_per_position"] = [pos[i] for i in range(len(pos))]
        fmt = "prometheus-v1" if "num_drafts" in values or "accepted_per_position" in values else "prometheus-v0"
        records.append(
            SpecDecodeRecord(
                source="prometheus",
                format=fmt,
                file=file,
                line=None,
                engine=_engine_id(dict(key).get("engine")),
                cumulative=True,
                **values,  # type: ignore[arg-type]
            )
        )
    return records


def _engine_id(label: str | None) -> int | None:
    if label is None:
        return None
    try:
        return int(label)
    except ValueError:
        return None

"""record_json writes exactly what json.dumps(record.to_dict()) writes, for any field values."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from specbench.metrics.parse import parse_file
from specbench.metrics.record import EngineStatsRecord, SpecDecodeRecord
from specbench.metrics.record_json import json_line, json_lines

DATA = Path(__file__).parents[1] / "analysis" / "data"
VALUES = [
    None,
    True,
    False,
    0,
    -0,
    7,
    -3,
    10**30,
    0.0,
    -0.0,
    0.5,
    2.7,
    1e-7,
    1e22,
    123456.789,
    math.inf,
    -math.inf,
    math.nan,
    "",
    "vllm",
    "caf\u00e9",
    'q"uote',
    "back\\slash",
    "tab\there",
    "nl\n",
    "\x7f",
    "\u2028",
    "\U0001f600",
    [],
    [0.5, 0.25],
    [1, 2, 3],
    [0.0, -0.0],
    [1, 2.5],
    [True],
    [None],
    [math.nan],
    ["a"],
    [[1]],
    (1, 2),
    {"a": 1},
]


def _random_record(rng: random.Random):
    cls = rng.choice([SpecDecodeRecord, EngineStatsRecord])
    rec = cls(source="vllm", format="f")
    for name in rec.to_dict():
        if name != "kind" and rng.random() < 0.7:
            setattr(rec, name, rng.choice(VALUES))
    return rec


def test_random_field_values_match_json_dumps():
    rng = random.Random(11)
    recs = [_random_record(rng) for _ in range(4000)]
    for rec in recs:
        assert json_line(rec) == json.dumps(rec.to_dict())
    assert json_lines(recs) == "".join(json.dumps(r.to_dict()) + "\n" for r in recs)
    assert json_lines([]) == ""


def test_repeated_values_use_the_caches_and_stay_exact():
    """The float and string caches: -0.0 after 0.0, 1 after 1.0 (equal keys, other texts)."""
    recs = [
        SpecDecodeRecord(source="vllm", format="f", mean_acceptance_length=v, per_position_acceptance=[v, v], time=t)
        for v, t in [(0.0, "a"), (-0.0, "a"), (1.0, "b"), (1.5, "b"), (1.5, 'b"')]
    ]
    recs.append(SpecDecodeRecord(source="vllm", format="f", mean_acceptance_length=1, per_position_acceptance=[1, 1]))
    for _ in range(2):
        assert [json_line(r) for r in recs] == [json.dumps(r.to_dict()) for r in recs]


def test_parsed_logs_match_json_dumps():
    for path in sorted(DATA.glob("*.log")):
        recs = parse_file(path).records
        assert json_lines(recs) == "".join(json.dumps(r.to_dict()) + "\n" for r in recs), path

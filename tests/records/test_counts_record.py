"""specbench/records/counts.py: Counts is the one typed form of the counts. Parsers give it
(SpecDecodeRecord.counts()), records validate and write it (acceptance.json's ``counts`` objects), and
it stays out of the parsers' start-up (no pydantic until a record is built)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.errors import InputError
from specbench.io import load_json
from specbench.metrics.parse import parse_text
from specbench.records.counts import MAX_POSITIONS, WRITTEN, Counts
from specbench.records.files import Acceptance, Total, Windows, diff_counts
from specbench.run import collect

ROOT = Path(__file__).resolve().parents[2]
BASELINES = ROOT / "results" / "baselines"
CELLS = sorted(p.parent for p in BASELINES.glob("*/*/metrics_after.prom") if (p.parent / "acceptance.json").is_file())


def test_there_are_committed_cells_with_scrapes():
    assert len(CELLS) >= 5, CELLS


@pytest.mark.parametrize("cell", CELLS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_scrape_counts_diff_to_the_committed_prometheus_counts(cell):
    """SpecDecodeRecord.counts() of the two real scrapes, differenced, is what the run wrote as the
    cell's exact counts (acceptance.json, written by the code before this model existed)."""
    written = load_json(cell / "acceptance.json")["prometheus"]["counts"]
    before = collect.prometheus_counts((cell / "metrics_before.prom").read_text())
    after = collect.prometheus_counts((cell / "metrics_after.prom").read_text())
    d = diff_counts(after, before)
    if written is None:  # a baseline cell: no spec-decode series at all
        assert after is None
        return
    assert d is not None and d.to_dict() == written


@pytest.mark.parametrize("cell", CELLS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_acceptance_counts_are_counts_and_write_back_byte_for_byte(cell):
    path = cell / "acceptance.json"
    acc = Acceptance.parse(load_json(path), path)
    objs = [acc.prometheus.counts, acc.logs.counts, *acc.logs.windows]
    if acc.per_request is not None:
        objs += [acc.per_request.counts, *acc.per_request.units]
    assert all(isinstance(c, Counts) for c in objs if c is not None)
    assert json.dumps(acc.dump()) == json.dumps(load_json(path))
    # The model's own writer (to_dict) and the record's schema write the same object.
    for c in objs:
        if c is not None:
            assert Total(counts=c).dump()["counts"] == c.to_dict()
            assert list(c.to_dict()) == list(WRITTEN)


def test_a_record_gives_counts_only_when_it_printed_all_three():
    """spec_decode.py's block prints drafts, drafted and accepted: its Counts are exactly those. vLLM
    0.32's log line prints no drafts: no Counts (analysis derives them, labelled as derived), never
    a guess in the record."""
    block = "\n".join(
        ["-" * 50, "total_num_output_tokens: 900", "num_drafts: 200", "num_draft_tokens: 600"]
        + ["num_accepted_tokens: 330", "mean acceptance length: 2.65", "-" * 50]
        + [f"acceptance at token {i}: {p}" for i, p in enumerate((0.80, 0.55, 0.30))]
    )
    (rec,) = [r for r in parse_text(block, file="offline.txt") if r.kind == "spec_decode"]
    c = rec.counts()
    assert c is not None and (c.num_drafts, c.draft_tokens, c.accepted_tokens) == (200, 600, 330)
    assert c.origin == "offline.txt" and c.derived == ()
    log = (BASELINES / "cpu-default" / "mla-on__output_norm-on__r0" / "server.log").read_text()
    line = next(x for x in log.splitlines() if "SpecDecoding metrics:" in x)
    (v1,) = [r for r in parse_text(line, file="server.log") if r.kind == "spec_decode"]
    assert v1.draft_tokens and v1.accepted_tokens and v1.num_drafts is None and v1.counts() is None


def test_a_writer_gets_the_readers_checks_and_labels_are_not_written():
    ok = Counts(10, 30, 12, [7, 4, 1], 3, derived=("num_drafts",), origin="server.log:7", time="13:26:42")
    assert Windows(windows=[ok]).dump() == {"windows": [ok.to_dict()]}
    assert ok.to_dict()["derived"] == ["num_drafts"] and "origin" not in ok.to_dict()
    for bad in (
        Counts(10, 30, 12, None, MAX_POSITIONS + 1),
        Counts(10, 30, 12, [0] * (MAX_POSITIONS + 1)),
        Counts(True, 30, 12),  # type: ignore[arg-type]
    ):
        with pytest.raises(InputError, match=r"^acceptance.json: logs.windows\[0\]\.\w+"):
            Acceptance.parse({"logs": {"windows": [bad]}}, "acceptance.json")


def test_the_parsers_start_without_pydantic():
    """`specbench parse` and `--help` load the metrics parsers: Counts there must not pull pydantic."""
    code = "import sys, specbench.metrics.parse, specbench.cli.main; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"

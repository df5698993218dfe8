"""Logs as people paste them (tests/metrics/data/pasted/excerpts.yaml): Markdown code, tables,
bullets and quotes, marker-less lines, hand-wrapped records, "..." elisions, fixed-width cuts and
the offline spec_decode.py block; expected fields were derived by hand from each excerpt."""

from pathlib import Path

import pytest
import yaml

from specbench.metrics.parse import parse_file, parse_text

CORPUS = yaml.safe_load((Path(__file__).parent / "data" / "pasted" / "excerpts.yaml").read_text())


def test_corpus_cites_every_source():
    assert len(CORPUS) >= 15
    assert all(c["source"].startswith("https://github.com/") and c["paste"] for c in CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[f"{i}:{c['paste'][:40]}" for i, c in enumerate(CORPUS)])
def test_pasted_excerpt(case, tmp_path):
    path = tmp_path / "pasted.md"
    path.write_text(case["text"])
    for records in (parse_text(case["text"], file="x"), parse_file(path).records):  # both readers agree
        got = [r.to_dict() for r in records if r.kind == "spec_decode"]
        assert len(got) == len(case["expect"]), got
        for rec, want in zip(got, case["expect"]):
            for field, value in want.items():
                if isinstance(value, (float, list)):
                    assert rec[field] == pytest.approx(value, abs=1e-9), field
                else:
                    assert rec[field] == value, field


def test_a_wrapped_record_cut_by_a_chunk_boundary_is_whole(tmp_path, monkeypatch):
    from specbench.metrics import parse

    wrapped = next(c for c in CORPUS if c["paste"].startswith("wrapped inside the per-position list"))
    text = "".join(f"plain line {i}\n" for i in range(40)) + wrapped["text"] + "plain tail\n"
    path = tmp_path / "wrapped.log"
    path.write_text(text)
    want = [r.to_dict() for r in parse_text(text, file=str(path))]
    assert len(want) == 1 and want[0]["per_position_acceptance"] is not None
    for chunk in range(64, 1200, 37):  # boundaries everywhere in and around the record
        monkeypatch.setattr(parse, "CHUNK_BYTES", chunk)
        assert [r.to_dict() for r in parse_file(path).records] == want, chunk

"""parse_file's chunked scanner agrees with the line-by-line parser, across chunk boundaries."""

from pathlib import Path

import specbench.metrics.parse as parse_mod

DATA = Path(__file__).parents[1] / "analysis" / "data"


def test_chunked_scan_equals_line_parser(tmp_path, monkeypatch):
    text = (DATA / "real_v1_server.log").read_text() + "\n" + (DATA / "vllm_v1_windows.log").read_text()
    path = tmp_path / "mixed.log"
    path.write_text(text)
    expected = [r.to_dict() for r in parse_mod.parse_text(text, file=str(path))]
    assert len(expected) > 6
    for chunk in (64, 1000, 1 << 20):
        monkeypatch.setattr(parse_mod, "CHUNK_BYTES", chunk)
        got = [r.to_dict() for r in parse_mod.parse_file(path).records]
        assert got == expected, chunk


def test_chunk_edges_keep_line_numbers_and_replacement_counts(tmp_path, monkeypatch):
    """No final newline, a line longer than several chunks, invalid UTF-8 in and out of hits."""
    spec = (
        "(APIServer pid=7) INFO 12-02 20:57:00 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
        "2.39, Accepted throughput: 39.07 tokens/s, Drafted throughput: 84.19 tokens/s, Accepted: 71 tokens, "
        "Drafted: 153 tokens, Per-position acceptance rate: 0.608, 0.431, 0.353, Avg Draft acceptance rate: 46.4%"
    )
    lines = ["plain \xff line", spec, "x" * 700, "caf\xe9 " + spec, "\r", spec]  # last line: no newline
    data = "\n".join(lines).encode("latin-1")
    path = tmp_path / "edges.log"
    path.write_bytes(data)
    for chunk in (16, 100, 1 << 20):
        monkeypatch.setattr(parse_mod, "CHUNK_BYTES", chunk)
        res = parse_mod.parse_file(path)
        assert [r.line for r in res.records] == [2, 4, 6], chunk
        assert res.replaced_chars == 2, chunk

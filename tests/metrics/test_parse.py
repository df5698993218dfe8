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

"""specbench/metrics/summaries.py: the offline spec_decode.py block in the shapes a paste or a log
gives it. The text is the script's output as the corpus quotes it (tests/metrics/data/pasted,
vllm-project/vllm#26498, as found): a 50-dash separator, five ``name: value`` count lines, a second
separator, then ``acceptance at token i: x.xx`` per position. Both readers (``parse_text`` and the
chunked ``parse_file``) must give the same records."""

from __future__ import annotations

import pytest

from specbench.metrics.parse import parse_file, parse_text

SEP = "-" * 50


def printed(drafts: int, accepted: int, positions: list[float], total: int = 0) -> list[str]:
    """The lines spec_decode.py prints after a run."""
    return [
        SEP,
        f"total_num_output_tokens: {total or drafts + accepted}",
        f"num_drafts: {drafts}",
        f"num_draft_tokens: {drafts * len(positions)}",
        f"num_accepted_tokens: {accepted}",
        f"mean acceptance length: {1 + accepted / drafts:.2f}",
        SEP,
        *[f"acceptance at token {i}: {p:.2f}" for i, p in enumerate(positions)],
    ]


def _records(text: str, tmp_path, chunk: int | None = None, monkeypatch=None) -> list[dict]:
    path = tmp_path / "out.md"
    path.write_text(text)
    if chunk is not None:
        from specbench.metrics import parse

        monkeypatch.setattr(parse, "CHUNK_BYTES", chunk)
    got = [
        [r.to_dict() for r in recs if r.kind == "spec_decode"]
        for recs in (parse_text(text, file=str(path)), parse_file(path).records)
    ]
    assert got[0] == got[1]
    return got[0]


def _fields(rec: dict) -> tuple:
    return rec["line"], rec["num_drafts"], rec["mean_acceptance_length"], rec["per_position_acceptance"]


def test_the_per_position_block_alone_in_a_fence_with_separators(tmp_path):
    """The shape issue 30 found unread: only the "acceptance at token i" lines, fenced, between the
    script's separators."""
    lines = printed(20468, 48266, [0.71, 0.50, 0.36])
    text = "\n".join(["Per position:", "```", SEP, *lines[7:], SEP, "```"]) + "\n"
    (rec,) = _records(text, tmp_path)
    assert _fields(rec) == (4, None, None, [0.71, 0.50, 0.36])
    assert (rec["source"], rec["cumulative"], rec["accepted_tokens"]) == ("vllm-offline", True, None)


def test_two_runs_printed_one_after_the_other_are_two_records(tmp_path):
    """A field the open block already holds starts the next block (before, the second run's values
    overwrote the first's in one record)."""
    text = "\n".join(printed(100, 175, [0.88, 0.56, 0.31]) + printed(200, 150, [0.5, 0.25])) + "\n"
    assert [_fields(r) for r in _records(text, tmp_path)] == [
        (2, 100, 2.75, [0.88, 0.56, 0.31]),
        (12, 200, 1.75, [0.5, 0.25]),
    ]
    positions_twice = (
        "\n".join(["```", *printed(100, 175, [0.88])[7:], "```", "", "```", SEP, *printed(200, 150, [0.5])[7:], "```"])
        + "\n"
    )
    assert [_fields(r) for r in _records(positions_twice, tmp_path)] == [
        (2, None, None, [0.88]),
        (7, None, None, [0.5]),
    ]


def test_blank_and_fence_lines_inside_a_block_up_to_the_gap(tmp_path):
    from specbench.metrics.summaries import MAX_GAP

    lines = printed(100, 175, [0.88, 0.56])
    near = "\n".join(lines[:6] + [""] * MAX_GAP + lines[6:]) + "\n"
    assert [_fields(r) for r in _records(near, tmp_path)] == [(2, 100, 2.75, [0.88, 0.56])]
    # After its per-position lines, a block ends past the gap: what follows is not this run's.
    after = "\n".join(lines + [""] * (MAX_GAP + 1) + ["acceptance at token 1: 0.50"]) + "\n"
    assert [_fields(r) for r in _records(after, tmp_path)] == [(2, 100, 2.75, [0.88, 0.56])]


def test_per_position_lines_after_an_interruption_are_the_counts_run(tmp_path):
    """Issue 43, item 7: counts and per-position lines of one run are one record even when lines
    stand between them (blank lines past the gap, a sentence, a server log line on stderr between
    the script's prints); the log line is still read as its own record."""
    from specbench.metrics.summaries import MAX_GAP, MAX_INTERRUPTION

    lines = printed(100, 175, [0.88, 0.56])
    far = "\n".join(lines[:6] + [""] * (MAX_GAP + 1) + lines[6:]) + "\n"
    assert [_fields(r) for r in _records(far, tmp_path)] == [(2, 100, 2.75, [0.88, 0.56])]
    prose = "\n".join(lines[:6] + ["", "and the positions:", ""] + lines[6:]) + "\n"
    assert [_fields(r) for r in _records(prose, tmp_path)] == [(2, 100, 2.75, [0.88, 0.56])]
    stats = (
        "(EngineCore pid=7) INFO 12-02 13:26:42 [loggers.py:123] SpecDecoding metrics: Mean acceptance length: "
        "2.70, Accepted throughput: 1.0 tokens/s, Drafted throughput: 2.0 tokens/s, Accepted: 10 tokens, "
        "Drafted: 20 tokens, Per-position acceptance rate: 0.500, 0.300, Avg Draft acceptance rate: 50.0%"
    )
    logged = "\n".join(lines[:7] + [stats] + lines[7:]) + "\n"
    got = _records(logged, tmp_path)
    assert sorted(_fields(r) for r in got) == [(2, 100, 2.75, [0.88, 0.56]), (8, None, 2.7, [0.5, 0.3])]
    too_far = "\n".join(lines[:6] + ["x"] * (MAX_INTERRUPTION + 1) + lines[6:]) + "\n"
    assert [_fields(r) for r in _records(too_far, tmp_path)] == [
        (2, 100, 2.75, None),
        (6 + MAX_INTERRUPTION + 1 + 2, None, None, [0.88, 0.56]),
    ]


@pytest.mark.parametrize(
    "lines",
    [
        ["acceptance at token 3: 0.26", "acceptance at token 4: 0.18"],  # not from token 0: no list
        ["acceptance at token 0: 0.71", "...", "acceptance at token 9: 0.02"],  # elided
    ],
)
def test_per_position_lines_that_do_not_give_the_whole_list_give_no_record(lines, tmp_path):
    assert _records("\n".join(["```", SEP, *lines, "```"]) + "\n", tmp_path) == []


def test_a_block_cut_by_any_chunk_boundary_is_whole(tmp_path, monkeypatch):
    text = (
        "".join(f"INFO plain line {i}\n" for i in range(30))
        + "```\n"
        + SEP
        + "\n"
        + "\n".join(printed(100, 175, [0.88, 0.56, 0.31])[7:])
        + "\n"
        + SEP
        + "\n```\n\n```\n"
        + "\n".join(printed(200, 150, [0.5, 0.25]))
        + "\n```\nplain tail\n"
    )
    want = _records(text, tmp_path)
    assert [_fields(r) for r in want] == [(33, None, None, [0.88, 0.56, 0.31]), (41, 200, 1.75, [0.5, 0.25])]
    for chunk in range(48, 900, 29):
        assert _records(text, tmp_path, chunk, monkeypatch) == want, chunk


@pytest.mark.parametrize("positions", [[0.81, 0.64, 0.57], [0.81, 0.64, 0.57, 0.41, 0.30]], ids=["k3", "k5"])
@pytest.mark.parametrize("shape", ["printed", "one line", "one line without separators", "one line in a sentence"])
def test_the_offline_examples_output_is_one_record_with_counts_and_positions(shape, positions, tmp_path):
    """Issue 43, item 7: examples/offline_inference/spec_decode.py's output (its print calls: a
    50-dash line, total_num_output_tokens, num_drafts, num_draft_tokens, num_accepted_tokens, "mean
    acceptance length: {:.2f}", a 50-dash line, then "acceptance at token {i}: {:.2f}"), as printed
    and as an issue thread shows it pasted outside a code fence: on one line."""
    lines = printed(6711, 13581, positions, total=20480)
    text = {
        "printed": "\n".join(lines),
        "one line": " ".join(lines),
        "one line without separators": " ".join(x for x in lines if x != SEP),
        "one line in a sentence": "Our run gave " + " ".join(lines) + " on one H100.",
    }[shape] + "\n"
    (rec,) = _records(text, tmp_path)
    got = {k: rec[k] for k in ("emitted_tokens", "num_drafts", "draft_tokens", "accepted_tokens")}
    assert got == {
        "emitted_tokens": 20480,
        "num_drafts": 6711,
        "draft_tokens": 6711 * len(positions),
        "accepted_tokens": 13581,
    }
    assert rec["mean_acceptance_length"] == 3.02
    assert rec["per_position_acceptance"] == positions
    assert (rec["source"], rec["line"]) == ("vllm-offline", 2 if shape == "printed" else 1)


def test_two_runs_pasted_on_one_line_are_two_records(tmp_path):
    text = " ".join(printed(100, 175, [0.88, 0.56, 0.31]) + printed(200, 150, [0.5, 0.25])) + "\n"
    assert [_fields(r) for r in _records(text, tmp_path)] == [
        (1, 100, 2.75, [0.88, 0.56, 0.31]),
        (1, 200, 1.75, [0.5, 0.25]),
    ]

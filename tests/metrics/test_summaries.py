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
    far = "\n".join(lines[:6] + [""] * (MAX_GAP + 1) + lines[6:]) + "\n"
    first_position = 6 + (MAX_GAP + 1) + 2  # after the counts, the blank lines and the separator
    assert [_fields(r) for r in _records(far, tmp_path)] == [
        (2, 100, 2.75, None),
        (first_position, None, None, [0.88, 0.56]),
    ]
    prose = "\n".join(lines[:6] + ["", "and the positions:", ""] + lines[6:]) + "\n"
    assert len(_records(prose, tmp_path)) == 2  # text between: two blocks


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

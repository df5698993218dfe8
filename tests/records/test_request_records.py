"""specbench/records/requests.py: a run's requests.jsonl rows are validated once, where a cell's
requests are read (results/store.py CellData.request_records), into RequestRecords tagged with the
cell's repeat; readers after that take the records as they are."""

from __future__ import annotations

import json

import pytest

from specbench.errors import InputError
from specbench.records.requests import RequestRecord, errored, numbered_requests, requests_of
from specbench.results.store import CellData

ROW = {
    "id": 0,
    "prompt_id": "p0",
    "ttft_s": 0.1,
    "e2e_s": 1.0,
    "output_tokens": 11,
    "error": None,
    "spec_decode": {"num_drafts": 4, "draft_tokens": 12, "accepted_tokens": 6, "accepted_per_position": [3, 2, 1]},
    "error_msg": "",  # a key the model does not name (llmperf's)
}


def _cell(tmp_path, lines: list[str], repeat: int = 2) -> CellData:
    d = tmp_path / "c"
    d.mkdir()
    (d / "requests.jsonl").write_text("".join(line + "\n" for line in lines))
    return CellData("c", d, {"cell_id": "c", "axes": {}, "repeat": repeat, "status": "done"}, None, None)


def test_a_cells_requests_are_records_tagged_with_its_repeat(tmp_path):
    cell = _cell(tmp_path, [json.dumps(ROW), "", json.dumps({**ROW, "id": 1, "error": "HTTP 500"})])
    recs = cell.request_records()
    assert [type(r) for r in recs] == [RequestRecord, RequestRecord]
    assert [(r.id, r.repeat, r.ok) for r in recs] == [(0, 2, True), (1, 2, False)]
    assert recs[0].spec_decode is not None and recs[0].spec_decode.counts().accepted_per_position == [3, 2, 1]
    assert recs[0].extra("error_msg") == "" and recs[0].extra("no_such_key") is None
    assert recs[0].dump() == ROW  # the tag is never written back


def test_a_damaged_row_is_refused_naming_file_line_and_field(tmp_path):
    cell = _cell(tmp_path, [json.dumps(ROW), "", json.dumps({**ROW, "ttft_s": "fast"})])
    with pytest.raises(InputError) as err:
        cell.request_records()
    path = tmp_path / "c" / "requests.jsonl"
    assert str(err.value).startswith(f"{path}:3: ttft_s: ")  # the file's line, not the row's index
    assert str(err.value).endswith("; re-run the cell or delete the file")


def test_records_pass_through_unvalidated_again():
    recs = numbered_requests([(1, ROW)], "requests.jsonl", 0)
    again = requests_of(recs)
    assert all(a is b for a, b in zip(again, recs))
    assert requests_of([ROW])[0].repeat is None  # plain rows: validated, untagged


@pytest.mark.parametrize(
    "row, failed",
    [
        ({}, False),
        ({"error": None, "error_code": None}, False),
        ({"error": ""}, False),
        ({"error": "HTTP 500"}, True),
        ({"error_code": 404}, True),
        ({"error_code": "ConnectError"}, True),
        ({"error_msg": "Warning Or Error: 400 Client Error"}, True),  # llmperf's own rows
        ({"error_msg": ""}, False),
    ],
)
def test_a_failed_request_is_the_same_as_written_and_as_a_record(row, failed):
    """compare/values.py checks rows as written and the readers use records: both leave out the
    same requests."""
    assert errored(row) is failed
    assert errored(requests_of([row])[0]) is failed

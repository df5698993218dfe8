"""Bad values in requests.jsonl and mixed k (issue 29): input errors (exit 2) naming file, line and
field, never a crash, a silent drop or a verdict. Copies of the committed CPU baseline, edited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from realruns import BASELINE, run

CELL = "mla-on__output_norm-on__r0"


def _edit_row(run_dir: Path, index: int, edit) -> Path:
    f = run_dir / CELL / "requests.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    edit(rows[index])
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))  # json writes Infinity / NaN as such
    return f


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(
    "field, edit, shown",
    [
        # was: OverflowError, "report it"
        ("spec_decode.num_drafts", lambda r: r["spec_decode"].update(num_drafts=INF), "Infinity"),
        # was: the request left out silently
        (
            "spec_decode.accepted_per_position[1]",
            lambda r: r["spec_decode"]["accepted_per_position"].__setitem__(1, -3),
            "negative (-3)",
        ),
        ("e2e_s", lambda r: r.update(e2e_s=INF), "Infinity"),  # was: a speed-up of 0, FAIL
        ("ttft_s", lambda r: r.update(ttft_s=NAN), "NaN"),  # was: an inconclusive row
        ("itl_s[2]", lambda r: r["itl_s"].__setitem__(2, -0.5), "negative (-0.5)"),
        ("output_tokens", lambda r: r.update(output_tokens=-INF), "-Infinity"),
    ],
)
def test_a_bad_count_or_time_is_an_input_error_naming_file_line_and_field(copy, field, edit, shown):
    f = _edit_row(copy, 4, edit)
    code, out = run(
        BASELINE, copy, "--gate", "acceptance_length:-3%", "--gate", "speedup:-5%", "--gate", "ttft_p50_ms:+50%"
    )
    assert code == 2, out
    flat = out.replace("\n", "")
    if shown.startswith("negative"):  # compare's check of a finished request's counts and times
        assert f"{f}:5: {field} is {shown}; a count or time must be a finite number >= 0" in flat
    else:  # a number JSON cannot hold is refused when the line is read (io.read_jsonl_lines, issue 43)
        value = {"Infinity": "inf", "-Infinity": "-inf", "NaN": "nan"}[shown]
        assert f"{f}:5: {field} is {value}, not a finite number" in flat
    assert "Traceback" not in out and "report it" not in out


def test_an_errored_requests_row_is_not_checked(copy):
    """An errored request's times are not measurements: a negative one is not checked (a NaN is
    refused for every row when the file is read: it is not a number JSON can hold)."""
    _edit_row(copy, 4, lambda r: r.update(error="HTTP 500", ttft_s=-1.0, spec_decode=None))
    code, out = run(BASELINE, copy)
    assert code != 2, out


def test_mixed_k_inside_a_cell_is_refused(copy):
    """One request at k=2 among k=3 ones: pooling silently dropped per_position[2] (23 checks of 24)."""

    def to_k2(sd):
        sd.update(
            num_spec_tokens=2, draft_tokens=2 * sd["num_drafts"], accepted_per_position=sd["accepted_per_position"][:2]
        )
        sd["accepted_tokens"] = sum(sd["accepted_per_position"])

    _edit_row(copy, 7, lambda r: to_k2(r["spec_decode"]))
    acc = json.loads((copy / CELL / "acceptance.json").read_text())
    to_k2(acc["per_request"]["units"][7])
    (copy / CELL / "acceptance.json").write_text(json.dumps(acc))
    code, out = run(BASELINE, copy)
    assert code == 2, out
    text = out.replace("\n", "")
    assert "cell mla=on, output_norm=on: per-position acceptance counts at different k (k=2 at " in text
    assert "split the cell" in text


def test_prometheus_counts_that_contradict_the_files_own_units_are_an_input_error(copy):
    """acceptance.json whose /metrics totals (num_drafts 2000, or 10**30) disagree with the sum of
    its own per-request units, while recording no disagreement: a damaged file, never a verdict
    (issue 43: it read as a REGRESSION, exit 1)."""
    for drafts in (2000, 10**30):
        path = copy / CELL / "acceptance.json"
        acc = json.loads(path.read_text())
        acc["prometheus"]["counts"]["num_drafts"] = drafts
        path.write_text(json.dumps(acc))
        code, out = run(BASELINE, copy, "--gate", "acceptance_length:-5%")
        assert code == 2, out
        assert "acceptance.json: its /metrics counts" in out.replace("\n", "") and "damaged" in out


@pytest.mark.parametrize("field, value", [("ttft_s", "fast"), ("finish_reason", 1)])
def test_a_value_of_the_wrong_type_is_an_input_error_naming_file_line_and_field(copy, field, value):
    """Rows are validated once, where compare reads them (after the checks above, which name the
    value as written): the file's line, not the row's place in the pooled cell. A field compare
    does not use (finish_reason) is refused too, as report refuses it: a damaged file is not read
    half-way (before, compare gave a verdict over such a row)."""
    f = _edit_row(copy, 4, lambda r: r.update({field: value}))
    code, out = run(BASELINE, copy)
    assert code == 2, out
    flat = out.replace("\n", "")
    assert f"{f}:5: {field}: input should be a valid" in flat and "re-run the cell or delete the file" in flat
    assert "Traceback" not in out

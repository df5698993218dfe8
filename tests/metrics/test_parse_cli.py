"""`specbench parse` through the real CLI (subprocess): stdout contents and exit codes."""

import json
import subprocess
import sys

import pytest

SEED = (
    "INFO 07-16 18:05:38 [metrics.py:87] SpecDecoding metrics: Draft acceptance rate: 58.4%, Mean acceptance length: 2.75, "
    "Accepted: 163 tokens, Drafted: 279 tokens, Per-position acceptance rate: 0.882, 0.559, 0.312"
)


def run(*args):
    return subprocess.run([sys.executable, "-m", "specbench", "parse", *map(str, args)], capture_output=True, text=True)


@pytest.mark.heavy
def test_jsonl_is_only_records(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"noise line\n" + SEED.encode() + b"\n\xff\xfe bad bytes\n")
    res = run(log, "--format", "jsonl")
    assert res.returncode == 0
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(rows) == 1 and rows[0]["draft_acceptance_rate"] == 0.584 and rows[0]["line"] == 2
    assert "replaced" in res.stderr


def test_unreadable_path_exit_2(tmp_path):
    res = run(tmp_path / "missing.log")
    assert res.returncode == 2 and "missing.log" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.heavy
def test_no_metrics_in_any_input_is_exit_2_naming_them_and_strict_is_the_same_error(tmp_path):
    """Issue 43, item 6: an empty table with exit 0 read as a result (a UTF-16 log, /dev/null, a
    log of another server). Without --strict: exit 2 when no input has metrics, exit 0 when one
    has; --strict: exit 2 when any lacks them. The same error line, and nothing on stdout."""
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    utf16 = tmp_path / "utf16.log"
    utf16.write_bytes((SEED + "\n").encode("utf-16"))
    good = tmp_path / "good.log"
    good.write_text(SEED + "\n")
    for args in ([empty], [empty, utf16], [empty, "--format", "jsonl"], [empty, "--strict"], [empty, good, "--strict"]):
        res = run(*args)
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert res.returncode == 2 and res.stdout == "", (args, res.stdout)
        assert len(errors) == 1 and "no SpecDecoding data in" in errors[0] and "empty.log" in errors[0], args
        assert "good.log" not in errors[0]
    res = run(empty, good, "--format", "jsonl")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 1 and "empty.log" in res.stderr


@pytest.mark.heavy
def test_csv_and_table(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(SEED + "\n")
    res = run(log, "--format", "csv")
    assert res.returncode == 0 and res.stdout.splitlines()[0].startswith("kind,") and "0.584" in res.stdout
    assert "163" in run(log).stdout


@pytest.mark.heavy
def test_jsonl_is_json_dumps_of_the_records_byte_for_byte(tmp_path):
    """The CLI's own JSON formatter and parse_file(engine_stats=False) change nothing users see:
    stdout is json.dumps of each record, with and without --engine-stats, across two files."""
    from pathlib import Path

    from specbench.metrics.parse import parse_file

    data = Path(__file__).parents[1] / "analysis" / "data"
    files = [data / "real_v1_server.log", data / "vllm_v1_windows.log"]
    recs = [r for f in files for r in parse_file(f).records]
    assert {r.kind for r in recs} == {"spec_decode", "engine_stats"}
    for flags, kinds in (((), {"spec_decode"}), (("--engine-stats",), {"spec_decode", "engine_stats"})):
        res = run(*files, "--format", "jsonl", *flags)
        assert res.returncode == 0
        assert res.stdout == "".join(json.dumps(r.to_dict()) + "\n" for r in recs if r.kind in kinds)


@pytest.mark.heavy
def test_cr_only_line_ends_are_read_like_lf(tmp_path):
    """Issue 43, item 6: a log whose lines end with a lone CR gave 1 of 5 records (its first)."""
    lf, cr = tmp_path / "lf.log", tmp_path / "cr.log"
    lf.write_bytes(("noise\n" + "\n".join([SEED] * 5) + "\n").encode())
    cr.write_bytes(("noise\r" + "\r".join([SEED] * 5) + "\r").encode())
    rows = {}
    for f in (lf, cr):
        res = run(f, "--format", "jsonl")
        assert res.returncode == 0, res.stderr
        rows[f.name] = [{k: v for k, v in json.loads(x).items() if k != "file"} for x in res.stdout.splitlines()]
    assert len(rows["cr.log"]) == 5 and [r["line"] for r in rows["cr.log"]] == [2, 3, 4, 5, 6]
    assert rows["cr.log"] == rows["lf.log"]


@pytest.mark.heavy
def test_a_metrics_scrape_shows_al_dar_and_p_i_derived_and_marked(tmp_path):
    """Issue 57: a /metrics scrape carries counts only, so the table showed drafts / drafted /
    accepted and no AL or p_i. The table derives them, marked "*" with how; the record (jsonl)
    keeps the counts as printed. Checked against the scrape read with prometheus_client's parser."""
    from pathlib import Path

    from prometheus_client.parser import text_string_to_metric_families

    prom = Path(__file__).parents[2] / "results/baselines/cpu-default/mla-on__output_norm-on__r0/metrics_after.prom"
    values: dict[str, float] = {}
    per: dict[int, float] = {}
    for fam in text_string_to_metric_families(prom.read_text()):
        for s in fam.samples:
            if s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
                per[int(s.labels["position"])] = s.value
            elif s.name.startswith("vllm:spec_decode_num_") and s.name.endswith("_total"):
                values[s.name] = s.value
    d, a = values["vllm:spec_decode_num_drafts_total"], values["vllm:spec_decode_num_accepted_tokens_total"]
    res = subprocess.run(
        [sys.executable, "-m", "specbench", "parse", str(prom)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "COLUMNS": "100"},
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].endswith("metrics_after.prom: 1 record(s), prometheus-v1")  # the title, never wrapped
    assert f"{1 + a / d:.2f}*" in res.stdout and all(f"{per[i] / d:.3f}*" in res.stdout for i in per)
    assert "* derived from the record's counts: AL = 1 + accepted / drafts" in res.stdout
    rec = json.loads(run(prom, "--format", "jsonl").stdout.splitlines()[0])
    assert rec["mean_acceptance_length"] is None and rec["num_drafts"] == d  # the record: as printed

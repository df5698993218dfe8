"""Every prompt a committed workload run sent is a member of its data set: the request's recorded
``prompt_sha256`` is the sha256 of a first turn in the data file under the request's ``prompt_id``,
and the manifest's data-file sha256 is the installed file's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from specbench.load.workloads import MTBENCH_PACKAGE, SHAREGPT_PACKAGE, data_file, load_workload, sharegpt_entries

RUN = Path(__file__).resolve().parents[2] / "results" / "baselines" / "cpu-workloads"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _requests(workload: str) -> list[dict]:
    rows = []
    for cell in sorted(RUN.iterdir()):
        f = cell / "requests.jsonl"
        cj = cell / "cell.json"
        if f.is_file() and json.loads(cj.read_text())["axes"].get("load:workload") == workload:
            rows += [{**json.loads(line), "_cell": cell.name} for line in f.read_text().splitlines() if line.strip()]
    assert rows, f"no {workload} cell in {RUN}"
    return rows


def _check(rows: list[dict], members: dict[str, str], workload: str) -> None:
    for r in rows:
        assert r["workload"] == workload
        assert members[r["prompt_id"].split("#")[0]] == r["prompt_sha256"], r["prompt_id"]


def test_mt_bench_requests_are_packaged_questions():
    path, _ = data_file(MTBENCH_PACKAGE)
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    _check(_requests("mt-bench"), {str(q["question_id"]): _sha(q["turns"][0]) for q in rows}, "mt-bench")
    manifest = json.loads((RUN / "manifest.json").read_text())
    assert manifest["workloads"]["mt-bench"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow  # reads the 120 MB ShareGPT file
def test_sharegpt_requests_are_conversations_of_the_packaged_file():
    path, _ = data_file(SHAREGPT_PACKAGE)
    entries, _ = sharegpt_entries(path)
    members = {}
    for e in entries:
        conv = e.get("conversations") or []
        if len(conv) >= 2 and isinstance(conv[0].get("value"), str):
            members.setdefault(str(e.get("id")), _sha(conv[0]["value"]))
    rows = _requests("sharegpt")
    _check(rows, members, "sharegpt")
    manifest = json.loads((RUN / "manifest.json").read_text())
    assert manifest["workloads"]["sharegpt"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    for cell in {r["_cell"] for r in rows}:  # distinct prompts in each cell: none sent twice
        mine = [r["prompt_sha256"] for r in rows if r["_cell"] == cell]
        assert len(set(mine)) == len(mine) == manifest["workloads"]["sharegpt"]["distinct_prompts"]


def test_builtin_requests_are_builtin_prompts():
    members = {p.id: p.sha256 for p in load_workload("builtin").prompts}
    _check(_requests("builtin"), members, "builtin")

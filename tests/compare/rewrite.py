"""Rewrites of a copy of the committed CPU baseline for compare tests (issue 37): fewer prompts, a
dead head, other per-request counts; acceptance.json's per-request units and totals follow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from realruns import SPEC_CELLS, copy_run

CountsFn = Callable[[int, dict], dict]  # (request index, spec_decode) -> new spec_decode


def rewrite(
    run_dir: Path, cells: list[str], counts: CountsFn | None = None, prompts: int | None = None, k: int | None = None
) -> Path:
    """Keep each cell's first ``prompts`` requests (all cells, baselines too) and give the requests
    of ``cells`` the counts ``counts`` returns; acceptance.json's units, totals and derived follow.
    ``k``: those cells ran (and vLLM attested) that many speculative tokens."""
    for cell_dir in sorted(p for p in run_dir.iterdir() if (p / "cell.json").is_file()):
        f = cell_dir / "requests.jsonl"
        rows = [json.loads(line) for line in f.read_text().splitlines()][:prompts]
        a = cell_dir / "acceptance.json"
        acc = json.loads(a.read_text())
        if acc.get("per_request") and counts is not None and cell_dir.name in cells:
            rows = [
                {**r, "spec_decode": counts(i, json.loads(json.dumps(r["spec_decode"])))} for i, r in enumerate(rows)
            ]
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        if not acc.get("per_request"):  # a no-speculation cell
            continue
        if k is not None and cell_dir.name in cells:
            acc["num_spec_tokens"] = k
            c = json.loads((cell_dir / "cell.json").read_text())
            c["spec"]["num_speculative_tokens"] = c["attested"]["num_speculative_tokens"] = k
            (cell_dir / "cell.json").write_text(json.dumps(c))
        k_cell = acc["num_spec_tokens"]
        keys = ("num_drafts", "draft_tokens", "accepted_tokens", "accepted_per_position")
        units = [
            {**u, **{key: r["spec_decode"][key] for key in keys}} for u, r in zip(acc["per_request"]["units"], rows)
        ]
        tot = {key: sum(u[key] for u in units) for key in ("num_drafts", "draft_tokens", "accepted_tokens")}
        tot["accepted_per_position"] = [sum(u["accepted_per_position"][i] for u in units) for i in range(k_cell)]
        acc["per_request"]["units"] = units
        for src in ("per_request", "prometheus", "logs"):
            acc[src]["counts"].update(tot)
        acc["logs"]["windows"] = [{**acc["logs"]["counts"]}]
        acc["derived"], acc["ci"] = {}, None
        a.write_text(json.dumps(acc))
    return run_dir


def dead(_: int, sd: dict) -> dict:
    """A dead head: it drafts as before and nothing is accepted."""
    k = len(sd["accepted_per_position"])
    return {**sd, "accepted_tokens": 0, "accepted_per_position": [0] * k, "acceptance_histogram": None}


def shorter(k: int) -> CountsFn:
    """A head that drafts ``k`` tokens: the first ``k`` positions' counts as they were."""

    def counts(_: int, sd: dict) -> dict:
        acc = sd["accepted_per_position"][:k]
        d = sd["num_drafts"]
        return {
            **sd,
            "num_spec_tokens": k,
            "draft_tokens": d * k,
            "accepted_tokens": sum(acc),
            "accepted_per_position": acc,
            "acceptance_histogram": None,
        }

    return counts


def first_prompts(dst: Path, prompts: int, cells: list[str] = SPEC_CELLS, counts: CountsFn | None = None) -> Path:
    """A copy of the committed baseline cut to its first ``prompts`` requests per cell."""
    return rewrite(copy_run(dst), cells, counts, prompts)

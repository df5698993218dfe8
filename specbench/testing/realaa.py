"""A/A studies drawn from the committed default study's real requests (test support).

Population: each speculative cell of results/baselines/cpu-default, each of its 20 prompts with
its own recorded distribution of accepted lengths per draft (from ``accepted_per_position``:
acceptance is a prefix, so a_(j-1) - a_j drafts accepted exactly j tokens). One A/A study draws
``n`` of a cell's prompts (without replacement) and gives each side, for each drawn prompt, as many
drafts as were recorded, each an independent draw from that prompt's accepted-length
distribution: the same prompts run twice with fresh sampling noise. Prompts differ as much as
they really do, including the skewed cells (output norm off: p_1, p_2 near 0; logits-only: p_2
near 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from specbench.analysis.rates import total
from specbench.compare.sides import Side, SideCell, cell_key, cell_name
from specbench.records.counts import Counts
from specbench.records.files import Manifest
from specbench.records.requests import requests_of
from specbench.testing import BASELINES

BASELINE = BASELINES / "cpu-default"


def population(run: Path = BASELINE) -> dict[str, dict]:
    """``{cell id: {axes, k, prompts: [(prompt id, drafts, length probabilities)]}}`` of the speculative cells."""
    out = {}
    for cell_dir in sorted(
        p for p in run.iterdir() if (p / "cell.json").is_file() and not p.name.startswith("baseline")
    ):
        cell = json.loads((cell_dir / "cell.json").read_text())
        prompts = []
        for line in (cell_dir / "requests.jsonl").read_text().splitlines():
            row = json.loads(line)
            sd = row["spec_decode"]
            d, acc = sd["num_drafts"], sd["accepted_per_position"]
            ge = [d] + list(acc) + [0]  # drafts that accepted >= j tokens, j = 0..k+1
            hist = np.diff(-np.asarray(ge, dtype=float))  # drafts that accepted exactly j tokens
            prompts.append((row["prompt_id"], d, hist / d))
        out[cell_dir.name] = {"axes": cell["axes"], "k": len(acc), "prompts": prompts}
    return out


def _draw(prompts, rng: np.random.Generator, k: int) -> list[Counts]:
    units = []
    for _, d, probs in prompts:
        lengths = rng.multinomial(d, probs)  # drafts that accepted exactly j tokens
        acc = [int(lengths[j + 1 :].sum()) for j in range(k)]
        units.append(Counts(d, d * k, int(sum(acc)), acc, k))
    return units


def aa_sides(pop: dict[str, dict], n: int, rng: np.random.Generator) -> tuple[Side, Side]:
    """Two sides of one A/A study: ``n`` prompts per cell, the same prompts on both sides."""
    sides = []
    chosen = {
        cid: [c["prompts"][i] for i in rng.choice(len(c["prompts"]), size=n, replace=False)] for cid, c in pop.items()
    }
    for label in ("base", "cand"):
        cells = {}
        for cid, c in pop.items():
            units = _draw(chosen[cid], rng, c["k"])
            key = cell_key(c["axes"])
            cells[key] = SideCell(
                key=key,
                name=cell_name(c["axes"], cid),
                axes=c["axes"],
                cell_ids=[cid],
                units=units,
                unit_kind="request",
                k=c["k"],
                exact=total(units),
                requests=requests_of(
                    [{"prompt_id": p[0], "spec_decode": u.to_dict()} for p, u in zip(chosen[cid], units)]
                ),
            )
        sides.append(Side(path=Path(label), label=label, manifest=Manifest(run_id=label, cells=[]), cells=cells))
    return sides[0], sides[1]

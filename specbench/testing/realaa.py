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
            cells[cell_key(c["axes"])] = _side_cell(cid, c, chosen[cid], _draw(chosen[cid], rng, c["k"]))
        sides.append(Side(path=Path(label), label=label, manifest=Manifest(run_id=label, cells=[]), cells=cells))
    return sides[0], sides[1]


# A candidate with a known true harm: each prompt's accepted-length distribution changed so that the
# population's statistic drops by exactly the amount asked (a drop of T, 2T ...). Acceptance is a
# prefix, so a drop is a draft rejected at some position: ``_reject(probs, j, r)`` rejects the
# draft at position j with probability r, which scales p_j and every later p_i by (1 - r).


def _reject(probs: np.ndarray, j: int, r: float) -> np.ndarray:
    out = np.array(probs, dtype=float)
    moved = out[j + 1 :] * r
    out[j + 1 :] -= moved
    out[j] += moved.sum()
    return out


def _weights(prompts) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt: drafts, and the mean accepted tokens per draft."""
    d = np.array([p[1] for p in prompts], dtype=float)
    m = np.array([float(np.dot(np.arange(len(p[2])), p[2])) for p in prompts])
    return d, m


def harm(cell: dict, shape: str, amount: float, rng: np.random.Generator | None = None) -> dict:
    """``cell`` (a :func:`population` entry) with a true harm of ``amount``:

    - ``"al"``: AL drops by ``amount`` relative (0.05 = 5%), every prompt alike (every p_i scaled);
    - ``"p<j>"`` (``"p0"``): p_j drops by ``amount`` absolute (0.05 = 5pp), every prompt alike; later
      positions scale with it (a draft rejected at j is rejected after it), earlier ones unchanged;
    - ``"al-20%"``: AL drops by ``amount`` relative, all of it in a fixed 20% of the prompts.
    Raises ValueError when the cell cannot carry that drop (p_j below the amount)."""
    prompts = cell["prompts"]
    d, m = _weights(prompts)
    al = 1 + float((d * m).sum() / d.sum())
    if shape.startswith("p"):
        j = int(shape[1:])
        pj = float(sum(p[1] * p[2][j + 1 :].sum() for p in prompts) / d.sum())
        if pj < amount:
            raise ValueError(f"p_{j} = {pj:.3f} cannot drop by {amount}")
        new = [(pid, n, _reject(pr, j, amount / pj)) for pid, n, pr in prompts]
    elif shape in ("al", "al-20%"):
        lost = amount * al * d.sum()  # accepted tokens to take away, over the population
        chosen = np.arange(len(prompts))
        if shape == "al-20%":
            order = (rng or np.random.default_rng(0)).permutation(len(prompts))
            chosen = np.sort(order[: max(1, round(0.2 * len(prompts)))])
        r = lost / float((d[chosen] * m[chosen]).sum())  # scale every p_i of the chosen prompts by 1 - r
        if r > 1:
            raise ValueError(f"the chosen prompts cannot lose {amount:.0%} of the cell's AL")
        new = [
            (pid, n, _reject(pr, 0, r) if i in set(chosen.tolist()) else pr) for i, (pid, n, pr) in enumerate(prompts)
        ]
    else:
        raise ValueError(f"unknown harm shape {shape!r}")
    return {**cell, "prompts": new}


def boundary_sides(
    pop: dict[str, dict], harmed: dict[str, dict], n: int, rng: np.random.Generator
) -> tuple[Side, Side]:
    """An A/B study: ``n`` prompts per cell drawn once, the baseline from ``pop``, the candidate from
    ``harmed`` (the same prompts with their harmed distributions; cells it lacks unharmed)."""
    picks = {
        cid: rng.choice(len(c["prompts"]), size=min(n, len(c["prompts"])), replace=False) for cid, c in pop.items()
    }
    sides = []
    for label, source in (("base", pop), ("cand", {**pop, **harmed})):
        cells = {}
        for cid, c in source.items():
            chosen = [c["prompts"][i] for i in picks[cid]]
            cells[cell_key(c["axes"])] = _side_cell(cid, c, chosen, _draw(chosen, rng, c["k"]))
        sides.append(Side(path=Path(label), label=label, manifest=Manifest(run_id=label, cells=[]), cells=cells))
    return sides[0], sides[1]


def _side_cell(cid: str, c: dict, chosen, units: list[Counts]) -> SideCell:
    key = cell_key(c["axes"])
    return SideCell(
        key=key,
        name=cell_name(c["axes"], cid),
        axes=c["axes"],
        cell_ids=[cid],
        units=units,
        unit_kind="request",
        k=c["k"],
        exact=total(units),
        requests=requests_of([{"prompt_id": p[0], "spec_decode": u.to_dict()} for p, u in zip(chosen, units)]),
    )

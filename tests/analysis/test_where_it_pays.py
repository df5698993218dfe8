"""specbench.analysis.where_it_pays: the one line that says where speculation pays (per concurrency: some
interval above 1x pays, every interval below 1x does not, else not known)."""

from __future__ import annotations

from types import SimpleNamespace

from specbench.analysis.where_it_pays import levels, where_it_pays


def _s(cell: str, point: float, lo: float, hi: float):
    return SimpleNamespace(cell=cell, point={"output_tok_per_s": point}, intervals={"output_tok_per_s": (lo, hi)})


AXES = {f"c{c}-k{k}": {"concurrency": str(c), "num_speculative_tokens": str(k)} for c in (1, 2, 4, 8) for k in (1, 3)}


def test_pays_at_low_concurrency_not_at_high():
    speedups = [
        _s("c1-k1", 1.20, 1.05, 1.37),
        _s("c1-k3", 1.52, 1.31, 1.76),  # the best paying cell
        _s("c2-k1", 1.10, 1.01, 1.20),
        _s("c2-k3", 1.30, 0.95, 1.70),  # faster, but not known to pay: k=1 is the best of those that do
        _s("c4-k1", 0.97, 0.90, 1.05),
        _s("c4-k3", 0.99, 0.85, 1.15),
        _s("c8-k1", 0.80, 0.70, 0.90),
        _s("c8-k3", 0.70, 0.60, 0.80),
    ]
    found = levels(speedups, AXES)
    assert [(lv.concurrency, lv.verdict) for lv in found] == [
        (1, "pays"),
        (2, "pays"),
        (4, "not known"),
        (8, "does not pay"),
    ]
    assert found[1].best.cell == "c2-k1" and found[2].best.cell == "c4-k3"
    line = where_it_pays(speedups, AXES)
    assert line == (
        "Speculation pays on this run at concurrency 1-2 (best k=3: 1.52× [1.31, 1.76] at concurrency 1); "
        "it is not known to pay at 4 (best k=3: 0.99× [0.85, 1.15] at concurrency 4); "
        "it does not pay at 8 (best k=1: 0.80× [0.70, 0.90] at concurrency 8)."
    )


def test_never_pays_and_one_concurrency():
    slow = [_s("c1-k1", 0.6, 0.5, 0.7), _s("c1-k3", 0.9, 0.8, 1.1)]
    assert where_it_pays(slow, AXES).startswith("Speculation is not known to pay at any concurrency on this run; ")
    one = {"a": {"output_norm": "on"}, "b": {"output_norm": "off"}}
    assert where_it_pays([_s("a", 0.55, 0.50, 0.60), _s("b", 0.52, 0.47, 0.58)], one) == (
        "Speculation does not pay on this run: every speculative cell is slower (best output_norm=on: 0.55× [0.50, 0.60])."
    )
    assert where_it_pays([_s("a", 1.4, 1.1, 1.7)], one).startswith("Speculation pays on this run: best output_norm=on")
    assert "its interval includes 1×" in where_it_pays([_s("a", 1.4, 0.9, 1.7)], one)
    assert where_it_pays([], one) is None

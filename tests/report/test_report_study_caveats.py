"""specbench/report/baseline_pairs.timing_caveats: when client timings of two cells are not comparable."""

from __future__ import annotations

from specbench.report.baseline_pairs import CellRequests, timing_caveats


def _cell(label, start, end, host=None, baseline=False):
    return CellRequests(
        label=label,
        axes={},
        repeat=0,
        is_baseline=baseline,
        rows=[],
        load_tok_per_s=None,
        host=host,
        window=(f"2026-12-03T06:{start}+00:00", f"2026-12-03T06:{end}+00:00"),
    )


def test_sequential_cells_on_one_machine_have_no_caveat():
    base, a, b = (
        _cell("base", "00:00", "01:00", baseline=True),
        _cell("a", "01:00", "02:00"),
        _cell("b", "02:00", "03:00"),
    )
    assert timing_caveats(a, base, [base, a, b]) == []


def test_concurrent_cells_on_one_host_are_named():
    base = _cell("base", "00:00", "01:00", host="n1", baseline=True)
    a, b = _cell("a", "00:30", "02:00", host="n1"), _cell("b", "00:40", "01:30", host="n2")
    notes = timing_caveats(a, base, [base, a, b])
    # b overlaps both in time but ran on another node: it does not count
    assert [n.split(" on the same host")[0] for n in notes] == ["a ran alongside base", "base ran alongside a"]


def test_different_hosts_are_named():
    base, a = _cell("base", "00:00", "01:00", host="n1", baseline=True), _cell("a", "01:00", "02:00", host="n2")
    (note,) = timing_caveats(a, base, [base, a])
    assert "another host" in note and "n2 vs n1" in note

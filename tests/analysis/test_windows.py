"""Records -> per-window Counts: V1 windows, V0 cumulative differencing, Prometheus diffs, rate-only."""

import pytest

from specbench.analysis.rates import acceptance, total
from specbench.analysis.windows import counts_from_records, rate_only_summary
from specbench.metrics.record import EngineStatsRecord, SpecDecodeRecord


def v1(line, a, t, rates, al=None, dar=None, file="server.log"):
    return SpecDecodeRecord(
        source="vllm",
        format="v1",
        file=file,
        line=line,
        accepted_tokens=a,
        draft_tokens=t,
        per_position_acceptance=rates,
        mean_acceptance_length=al,
        draft_acceptance_rate=dar,
    )


def test_v1_seed_line_derives_drafts_and_positions():
    rec = v1(1, 163, 279, [0.774, 0.581, 0.398], al=2.75, dar=0.584)
    windows, warnings = counts_from_records([rec])
    assert warnings == []
    (w,) = windows
    assert w.num_drafts == 93  # 279 / 3, and 163 / (0.774 + 0.581 + 0.398) = 93.0
    assert w.accepted_per_position == [72, 54, 37]  # round(p_i * 93)
    assert set(w.derived) == {"num_drafts", "accepted_per_position"}
    assert acceptance(w).mean_acceptance_length == pytest.approx(1 + 163 / 93)


def test_windows_are_summed_not_averaged():
    # window 1: D=10, A=20 (AL 3.0); window 2: D=90, A=45 (AL 1.5). Averaging the AL gives 2.25;
    # the pooled truth is 1 + 65/100 = 1.65.
    recs = [v1(1, 20, 20, [1.0, 1.0]), v1(2, 45, 180, [0.3, 0.2])]
    windows, _ = counts_from_records(recs)
    assert [w.num_drafts for w in windows] == [10, 90]
    pooled = acceptance(total(windows))
    assert pooled.mean_acceptance_length == pytest.approx(1.65)
    assert pooled.per_position == pytest.approx([(10 + 27) / 100, (10 + 18) / 100])


def test_short_drafts_use_rates():
    # 278 drafted tokens is not a multiple of k=3 (one draft had 2 tokens); the rates pin D = 93.
    windows, warnings = counts_from_records([v1(1, 163, 278, [0.774, 0.581, 0.398])])
    assert windows[0].num_drafts == 93
    assert warnings == []


def test_drafted_needing_more_drafts_than_rates_allow_is_flagged():
    # 280 tokens need >= 94 drafts of 3, but 163 / sum(p) allows at most 93.06
    windows, warnings = counts_from_records([v1(1, 163, 280, [0.774, 0.581, 0.398])])
    assert windows[0].num_drafts == 94
    assert any("inconsistent" in w and "approximate" in w for w in warnings)


def test_drafted_over_k_disagreeing_with_rates_warns():
    # drafted/k says 93 drafts, but accepted/sum(p) = 163/1.63 = 100: some drafts were shorter.
    windows, warnings = counts_from_records([v1(1, 163, 279, [0.65, 0.55, 0.43])])
    assert windows[0].num_drafts == 100
    assert any("not all full length" in w for w in warnings)


def test_printed_values_checked_against_counts():
    _, warnings = counts_from_records([v1(1, 163, 279, [0.774, 0.581, 0.398], al=1.75, dar=0.700)])
    text = " ".join(warnings)
    assert "excludes the bonus token" in text  # 1.75 = 163/93, the pre-2025-05-09 definition
    assert "draft acceptance rate 0.7" in text


def test_v0_cumulative_lines_are_differenced_and_restart_detected():
    def v0(line, a, t, e):
        return SpecDecodeRecord(
            source="vllm",
            format="v0",
            file="v0.log",
            line=line,
            pid=7,
            cumulative=True,
            num_spec_tokens=4,
            accepted_tokens=a,
            draft_tokens=t,
            emitted_tokens=e,
        )

    recs = [v0(1, 10, 40, 20), v0(2, 30, 100, 55), v0(3, 35, 120, 65), v0(4, 4, 8, 6)]
    windows, warnings = counts_from_records(recs)
    # cumulative drafts 10, 25, 30 -> per-interval 10, 15, 5; then a restart with 2 drafts
    assert [(w.num_drafts, w.draft_tokens, w.accepted_tokens) for w in windows] == [
        (10, 40, 10),
        (15, 60, 20),
        (5, 20, 5),
        (2, 8, 4),
    ]
    assert sum("restart" in w for w in warnings) == 1
    assert not any("emitted" in w for w in warnings)  # E - A = D on every line


def test_v0_streams_are_separate_per_pid():
    recs = [
        SpecDecodeRecord(
            source="vllm",
            format="v0",
            file="x.log",
            line=i,
            pid=pid,
            cumulative=True,
            num_spec_tokens=2,
            accepted_tokens=a,
            draft_tokens=t,
        )
        for i, (pid, a, t) in enumerate([(1, 4, 10), (2, 6, 20), (1, 8, 20), (2, 9, 30)])
    ]
    windows, warnings = counts_from_records(recs)
    assert [w.accepted_tokens for w in windows] == [4, 6, 4, 3]
    assert not any("restart" in w for w in warnings)


def prom(file, d, t, a, pos):
    return SpecDecodeRecord(
        source="prometheus",
        format="prometheus",
        file=file,
        cumulative=True,
        engine=0,
        num_drafts=d,
        draft_tokens=t,
        accepted_tokens=a,
        accepted_per_position=pos,
    )


def test_prometheus_before_after_pair_diffs():
    before = prom("before.prom", 100, 300, 150, [70, 50, 30])
    after = prom("after.prom", 160, 480, 246, [110, 80, 56])
    windows, warnings = counts_from_records([before, after])
    assert warnings == []
    (w,) = windows
    assert (w.num_drafts, w.draft_tokens, w.accepted_tokens, w.accepted_per_position) == (60, 180, 96, [40, 30, 26])
    assert w.derived == ()


def test_lone_prometheus_scrape_is_since_start():
    (w,), _ = counts_from_records([prom("m.prom", 100, 300, 150, [70, 50, 30])])
    assert w.num_drafts == 100


def test_rate_only_records_are_not_summed():
    recs = [
        SpecDecodeRecord(source="sglang", format="sglang", file="sg.log", line=i, mean_acceptance_length=al)
        for i, al in ((1, 2.5), (2, 3.1))
    ]
    windows, warnings = counts_from_records(recs + [EngineStatsRecord(source="vllm", format="engine")])
    assert windows == []
    assert any("cannot be summed" in w for w in warnings)
    ro = rate_only_summary(recs)
    assert ro.n_records == 2 and not ro.weighted and ro.mean_acceptance_length is None
    assert [r["mean_acceptance_length"] for r in ro.per_record] == [2.5, 3.1]


def test_rate_only_with_drafts_is_weighted_by_drafts():
    recs = [
        SpecDecodeRecord(source="sglang", format="x", num_drafts=d, mean_acceptance_length=al)
        for d, al in ((10, 3.0), (90, 1.5))
    ]
    ro = rate_only_summary(recs)
    assert ro.weighted and ro.mean_acceptance_length == pytest.approx(1.65)


def test_unknown_k_without_rates_is_left_out():
    rec = SpecDecodeRecord(source="vllm", format="v1", file="a.log", line=3, accepted_tokens=5, draft_tokens=10)
    windows, warnings = counts_from_records([rec])
    assert windows == [] and "cannot derive num_drafts" in warnings[0]


def test_real_vllm_log_windows_match_ground_truth():
    """Lines written by vLLM's own SpecDecodingLogging (data/generate_v1_log.py) -> the exact counts."""
    import json
    from pathlib import Path

    parse = pytest.importorskip("specbench.metrics.parse")
    data = Path(__file__).parent / "data"
    truth = json.loads((data / "vllm_v1_windows.truth.json").read_text())
    result = parse.parse_file(data / "vllm_v1_windows.log")
    windows, warnings = counts_from_records(result.records)
    assert warnings == []
    got = [
        {
            "num_drafts": w.num_drafts,
            "draft_tokens": w.draft_tokens,
            "accepted_tokens": w.accepted_tokens,
            "accepted_per_position": w.accepted_per_position,
        }
        for w in windows
    ]
    assert got == truth


def _printed_v1(d, pos, draft_tokens):
    """A V1 record as vLLM prints it: rates to 3 decimals, AL to 2, DAR to 0.1%."""
    a = sum(pos)
    return SpecDecodeRecord(
        source="vllm",
        format="v1",
        file="h.log",
        line=1,
        accepted_tokens=a,
        draft_tokens=draft_tokens,
        per_position_acceptance=[round(x / d, 3) for x in pos],
        mean_acceptance_length=round(1 + a / d, 2),
        draft_acceptance_rate=round(a / draft_tokens, 3),
    )


def _prefix_counts(draw_list, d):
    # non-increasing per-position counts, as an accepted prefix produces
    out, cap = [], d
    for x in draw_list:
        cap = min(cap, x)
        out.append(cap)
    return out


from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150, deadline=None)
@given(d=st.integers(1, 999), k=st.integers(1, 5), data=st.data())
def test_full_length_windows_recover_exact_counts(d, k, data):
    pos = _prefix_counts(data.draw(st.lists(st.integers(0, d), min_size=k, max_size=k)), d)
    (w,), warnings = counts_from_records([_printed_v1(d, pos, d * k)])
    assert w.num_drafts == d
    assert w.accepted_per_position == pos  # round(p_i * D) is exact below 1000 drafts
    assert warnings == []


@settings(max_examples=150, deadline=None)
@given(d=st.integers(2, 3000), k=st.integers(2, 5), data=st.data())
def test_short_drafts_are_exact_or_flagged(d, k, data):
    short = data.draw(st.integers(1, d - 1))  # drafts with fewer than k tokens
    pos = _prefix_counts(data.draw(st.lists(st.integers(1, d), min_size=k, max_size=k)), d)
    assume(sum(pos) <= d * k - short)  # more accepted than drafted is invalid input (left out, tested apart)
    rec = _printed_v1(d, pos, d * k - short)
    windows, warnings = counts_from_records([rec])
    assert len(windows) == 1
    if windows[0].num_drafts == d or any("approximate" in w for w in warnings):
        return
    # The one case the printed line cannot reveal: short drafts whose tokens add up to a multiple of k
    # that the rates' rounding also allows; D = drafted/k is then the documented full-length assumption.
    a, s = sum(pos), sum(rec.per_position_acceptance)
    assert rec.draft_tokens % k == 0 and windows[0].num_drafts == rec.draft_tokens // k
    slack = k * (0.0005 + 1e-9)  # the parser's rounding slack (RATE_PRINT_TOL), float noise included
    assert a / (s + slack) <= rec.draft_tokens // k <= (a / (s - slack) if s > slack else float("inf"))


DATA = __import__("pathlib").Path(__file__).parent / "data"
# Read by hand from data/real_metrics_{before,after}.prom (vllm:spec_decode_*_total, engine 0)
AFTER = (541, 1623, 865, [394, 264, 207])
BEFORE = (52, 156, 74, [32, 23, 19])


def test_real_server_log_windows_sum_to_prometheus_counters():
    parse = pytest.importorskip("specbench.metrics.parse")
    windows, warnings = counts_from_records(parse.parse_file(DATA / "real_v1_server.log").records)
    assert warnings == []
    assert len(windows) == 6
    s = total(windows)
    assert (s.num_drafts, s.draft_tokens, s.accepted_tokens, s.accepted_per_position) == AFTER
    first = windows[0]  # the warm-up request, already in the 'before' scrape
    assert (first.num_drafts, first.draft_tokens, first.accepted_tokens, first.accepted_per_position) == BEFORE


def test_real_prometheus_pair_diffs_to_the_load():
    parse = pytest.importorskip("specbench.metrics.parse")
    recs = [
        r
        for name in ("before", "after")
        for r in parse.parse_prometheus((DATA / f"real_metrics_{name}.prom").read_text(), file=name)
    ]
    (w,), warnings = counts_from_records(recs)
    assert warnings == []
    expected = tuple(a - b for a, b in zip(AFTER[:3], BEFORE[:3])) + ([x - y for x, y in zip(AFTER[3], BEFORE[3])],)
    assert (w.num_drafts, w.draft_tokens, w.accepted_tokens, w.accepted_per_position) == expected


# --- counting corners (issue 11) ---------------------------------------------------------------


def test_counter_reset_between_scrapes_is_refused_naming_file_and_series():
    from specbench.errors import InputError

    before = prom("before.prom", 100, 300, 150, [70, 50, 30])
    after = prom("after.prom", 40, 120, 60, [28, 20, 12])  # the server restarted: counters from 0 again
    with pytest.raises(InputError) as exc:
        counts_from_records([before, after])
    msg = str(exc.value)
    assert "after.prom" in msg and "vllm:spec_decode_num_drafts_total 100 -> 40" in msg and "counter reset" in msg
    # a per-position counter alone going down is caught too
    after = prom("after.prom", 160, 480, 246, [110, 80, 29])
    with pytest.raises(InputError, match='per_pos_total{position="2"} 30 -> 29'):
        counts_from_records([before, after])


def test_two_engines_are_summed_before_differencing():
    b = [prom("b.prom", 100, 300, 150, [70, 50, 30]), prom("b.prom", 10, 30, 15, [7, 5, 3])]
    a = [prom("a.prom", 160, 480, 246, [110, 80, 56]), prom("a.prom", 30, 90, 45, [21, 15, 9])]
    for r, e in zip(b + a, (0, 1, 0, 1)):
        r.engine = e
    (w,), warnings = counts_from_records(b + a)
    assert warnings == [] and (w.num_drafts, w.accepted_tokens, w.accepted_per_position) == (80, 126, [54, 40, 32])


def test_impossible_log_counts_are_left_out_with_file_and_line():
    good = SpecDecodeRecord(
        source="vllm",
        format="v1",
        file="s.log",
        line=3,
        num_drafts=10,
        draft_tokens=30,
        accepted_tokens=15,
        accepted_per_position=[8, 5, 2],
    )
    more_accepted = SpecDecodeRecord(
        source="vllm",
        format="v1",
        file="s.log",
        line=7,
        num_drafts=10,
        draft_tokens=30,
        accepted_tokens=40,
        accepted_per_position=[10, 10, 20],
    )
    p_over_1 = SpecDecodeRecord(
        source="vllm",
        format="v1",
        file="s.log",
        line=9,
        num_drafts=10,
        draft_tokens=30,
        accepted_tokens=14,
        accepted_per_position=[12, 2, 0],
    )
    negative = SpecDecodeRecord(
        source="vllm",
        format="v1",
        file="s.log",
        line=11,
        num_drafts=10,
        draft_tokens=30,
        accepted_tokens=-3,
        accepted_per_position=[-3, 0, 0],
    )
    windows, warnings = counts_from_records([good, more_accepted, p_over_1, negative])
    assert [w.origin for w in windows] == ["s.log:3"]
    assert any(w.startswith("s.log:7: invalid counts (accepted_tokens 40 > draft_tokens 30)") for w in warnings)
    assert any(w.startswith("s.log:9: invalid counts (p_0 > 1") for w in warnings)
    assert any(w.startswith("s.log:11: invalid counts (negative count") for w in warnings)


def test_mixed_k_windows_are_warned():
    k3 = SpecDecodeRecord(
        source="vllm",
        format="v1",
        file="s.log",
        line=1,
        num_drafts=10,
        draft_tokens=30,
        accepted_tokens=15,
        accepted_per_position=[8, 5, 2],
    )
    k2 = SpecDecodeRecord(
        source="vllm",
        format="v1",
        file="s.log",
        line=5,
        num_drafts=10,
        draft_tokens=20,
        accepted_tokens=12,
        accepted_per_position=[8, 4],
    )
    windows, warnings = counts_from_records([k3, k2])
    assert len(windows) == 2
    (w,) = [w for w in warnings if "different k" in w]
    assert "k=2: 1 window(s), 10 drafts, first at s.log:5" in w and "k=3: 1 window(s)" in w


@pytest.mark.parametrize("positions", ["accepted_per_position", "per_position_acceptance"])
def test_k_zero_with_per_position_values_is_refused_naming_the_record(positions):
    """Issue 43, item 6: k = 0 with three positions was read as k = 3 (the missing-k rule)."""
    from specbench.errors import InputError

    values = {"accepted_per_position": [50, 30, 20], "per_position_acceptance": [0.5, 0.3, 0.2]}[positions]
    rec = SpecDecodeRecord(
        source="vllm",
        format="v1",
        file="server.log",
        line=7,
        num_drafts=100,
        accepted_tokens=100,
        draft_tokens=300,
        num_spec_tokens=0,
        **{positions: values},
    )
    with pytest.raises(InputError, match=r"^server\.log:7: num_spec_tokens is 0 but the record has 3 per-position"):
        counts_from_records([rec])

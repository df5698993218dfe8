"""DataFrames: canonical record columns; summary rows match hand-computed pooled statistics."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.counts import Counts, acceptance
from specbench.analysis.frames import records_to_frame, summary_frame, window_frame
from specbench.metrics.record import SpecDecodeRecord


def test_records_to_frame_has_canonical_columns():
    rec = SpecDecodeRecord(source="vllm", format="v1", file="a.log", line=4, accepted_tokens=163, draft_tokens=279)
    df = records_to_frame([rec, rec])
    assert list(df.columns) == list(rec.to_dict())
    assert df["accepted_tokens"].tolist() == [163, 163]
    assert records_to_frame([]).empty


def test_summary_frame_values_and_columns():
    groups = {
        "on": [Counts(10, 30, 20, [8, 7, 5], 3), Counts(90, 270, 45, [30, 10, 5], 3)],
        "single": [Counts(93, 279, 163, [72, 54, 37], 3)],
    }
    df = summary_frame(groups)
    on = df.set_index("label").loc["on"]
    assert on["num_drafts"] == 100 and on["accepted_tokens"] == 65
    assert on["mean_acceptance_length"] == pytest.approx(1.65)  # summed, not the averaged 2.25
    assert on["p0"] == pytest.approx(0.38) and on["a1"] == pytest.approx(17 / 38)
    assert on["p0_ci_low"] <= on["p0"] <= on["p0_ci_high"]
    single = df.set_index("label").loc["single"]
    assert bool(single["ci_degenerate"]) and single["mean_acceptance_length_ci_low"] == single["mean_acceptance_length"]
    for col in (
        "mean_acceptance_length_ci_low",
        "mean_acceptance_length_ci_high",
        "draft_acceptance_rate_ci_low",
        "p2_ci_high",
        "a0",
        "a0_ci_low",
        "a2_ci_high",
        "n_units",
        "unit",
    ):
        assert col in df.columns


def test_summary_frame_totals_override_point_but_not_ci():
    units = [Counts(10, 30, 20), Counts(10, 30, 10)]
    df = summary_frame({"g": units}, totals={"g": Counts(21, 63, 30)})
    assert df.loc[0, "num_drafts"] == 21
    assert df.loc[0, "mean_acceptance_length"] == pytest.approx(1 + 30 / 21)


def test_window_frame_is_per_window():
    df = window_frame({"g": [Counts(10, 20, 20, [10, 10], 2), Counts(90, 180, 45, [27, 18], 2)]})
    assert df["mean_acceptance_length"].tolist() == pytest.approx([3.0, 1.5])
    assert df["window"].tolist() == [0, 1]
    assert not math.isnan(df["p0"].iloc[1])


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["g", "h", "i"]),
        st.lists(
            st.builds(
                lambda d, a, pos, origin, time: Counts(d, 3 * d, a, pos, 3, (), origin, time),
                st.sampled_from([0, 1, 3, 7, 10**9 + 7]) | st.integers(0, 10**6),
                st.integers(0, 10**7),
                st.none() | st.just([]) | st.lists(st.integers(0, 10**6), min_size=1, max_size=3),
                st.none() | st.just("f.log:3"),
                st.none() | st.just("12-02 13:26:42"),
            ),
            max_size=8,
        ),
        max_size=3,
    )
)
def test_window_frame_values_are_acceptance_per_unit(groups):
    """The frame is built from arrays; every value is what acceptance() gives the unit, to the bit."""
    df = window_frame(groups)
    units = [(label, i, u) for label, us in groups.items() for i, u in enumerate(us)]
    assert len(df) == len(units)
    for (label, i, u), row in zip(units, df.itertuples(index=False)):
        acc = acceptance(u)
        p0 = acc.per_position[0] if acc.per_position else math.nan
        assert (row.label, row.window, row.time, row.origin) == (label, i, u.time, u.origin)
        assert (row.num_drafts, row.accepted_tokens) == (u.num_drafts, u.accepted_tokens)
        for got, want in ((row.mean_acceptance_length, acc.mean_acceptance_length), (row.p0, p0)):
            assert got == want or (math.isnan(got) and math.isnan(want))

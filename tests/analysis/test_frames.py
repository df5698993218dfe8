"""DataFrames: canonical record columns; summary rows match hand-computed pooled statistics."""

import pytest

from specbench.analysis.frames import records_to_frame, summary_frame
from specbench.metrics.record import SpecDecodeRecord
from specbench.records.counts import Counts


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

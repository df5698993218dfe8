"""acceptance.csv streamed by specbench.report.csvfile is byte for byte what DataFrame.to_csv
writes, long cells included (quotes, separators and line ends in them, split across chunks)."""

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.report import csvfile

TEXT = st.text(alphabet=st.sampled_from(list('ab ;,"\n\ré\t0')), max_size=60)


@pytest.mark.heavy
@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(TEXT, TEXT, st.integers(0, 3), st.sampled_from([0.5, math.nan, 1e-9])), min_size=1, max_size=4),
    st.integers(1, 9),
)
def test_streamed_csv_is_to_csv(rows, chunk):
    frame = pd.DataFrame([{"label": a, "n": n, "x": x, "warnings": w} for a, w, n, x in rows])
    old = (csvfile.LONG_CELL, csvfile._CHUNK)
    csvfile.LONG_CELL, csvfile._CHUNK = 4, chunk  # most cells long, in chunks of a few characters
    try:
        streamed = b"".join(csvfile.csv_chunks(frame))
    finally:
        csvfile.LONG_CELL, csvfile._CHUNK = old
    assert streamed == frame.to_csv(index=False).encode("utf-8")


def test_a_long_warnings_cell_is_streamed_in_chunks():
    warnings = "; ".join(f'f.log:{i}: printed "AL" 2.7, != 2.{i}' for i in range(20_000))
    frame = pd.DataFrame(
        [{"label": "g", "n_units": 3, "warnings": warnings}, {"label": "h", "n_units": 1, "warnings": ""}]
    )
    chunks = list(csvfile.csv_chunks(frame))
    assert max(len(c) for c in chunks) <= 2 * csvfile._CHUNK + 100  # quotes doubled at most
    assert b"".join(chunks) == frame.to_csv(index=False).encode("utf-8")

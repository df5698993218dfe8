"""Every estimate with an interval that a study page or README states ("0.58× [0.29, 1.17]", "Δ −0.132
[−0.223, −0.040]", "2.78 [2.57, 2.98]") is one that `specbench report` writes now for a committed
run a study page names: in its summary.md, or in its CSVs as a point with its ``_ci_low`` /
``_ci_high`` columns (within-run intervals included), to the page's rounding; or a copy of a table
a benchmark script generated into the page itself (between its ``<!-- script name -->`` markers,
which that script's own test keeps true). A contrast may be stated either way round (``+0.37
[+0.16, +0.59]`` for the report's ``-0.37 [-0.59, -0.16]``).

test_study_docs.py checks the acceptance tables column by column; this checks the prose and every
other table too. The reports are built for every page's runs and pooled, since a page may quote
another page's run (seed-questions.md quotes the head-variants run)."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest
from test_study_docs import DOCS, ROOT, _report_inputs

from specbench.report.assemble import build_report, write_report

NUM = r"[−+-]?\d+(?:\.\d+)?"
TRIPLE = re.compile(rf"(?<![\w.])({NUM})×? \[({NUM}), ({NUM})\]")
GENERATED = re.compile(r"<!-- (\S+) (\S+) -->.*?<!-- /\1 \2 -->", re.S)

# Measured once and not committed (a page says so where it states them): no run can produce them.
PAST = {
    ("head-variants.md", "2.69 [2.58, 2.79]"),  # compiled mode, "measured once, not committed"
    ("head-variants.md", "0.433 [0.402, 0.467]"),
    ("head-variants.md", "2.33 [2.25, 2.41]"),
    ("head-variants.md", "0.055 [0.030, 0.086]"),
}

Triple = tuple[float, float, float]
README = ROOT / "README.md"
# Runs README quotes that no study page's command names ("Where speculation pays, on a laptop").
README_RUNS = [ROOT / "results" / "baselines" / "cpu-speedup"]


def _f(text: str) -> float:
    return float(text.replace("−", "-"))


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _csv_triples(path: Path) -> list[Triple]:
    """(point, low, high) for every ``X_ci_low`` / ``X_ci_high`` pair of a CSV row, the point being
    the column ``X`` names once its interval's own words are taken off (``_within_run``)."""
    out: list[Triple] = []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            for low in (k for k in row if k.endswith("_ci_low")):
                stem = low[: -len("_ci_low")]
                point = next((p for p in (stem, stem.removesuffix("_within_run")) if p in row), None)
                values = [row.get(c) or "" for c in (point or "", low, stem + "_ci_high")]
                try:
                    triple = tuple(float(v) for v in values)
                except ValueError:
                    continue
                if all(math.isfinite(v) for v in triple):
                    out.append(triple)  # type: ignore[arg-type]
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[Triple]:
    """What the report writes for every committed run the study pages name, pooled."""
    triples: list[Triple] = []
    for inputs in [*(_report_inputs(doc.read_text()) for doc in DOCS), README_RUNS]:
        out = tmp_path_factory.mktemp("report")
        write_report(build_report(inputs), out, plots=False)
        text = " ".join((out / "summary.md").read_text().split())
        triples += [tuple(_f(x) for x in m) for m in TRIPLE.findall(text)]  # type: ignore[misc]
        for path in out.glob("*.csv"):
            triples += _csv_triples(path)
    for doc in DOCS:
        for block in GENERATED.finditer(doc.read_text()):
            triples += [tuple(_f(x) for x in m) for m in TRIPLE.findall(block.group(0))]  # type: ignore[misc]
    return triples


def _written(shown: tuple[str, str, str], triples: list[Triple]) -> bool:
    digits = [_decimals(s) for s in shown]
    want = [round(_f(s), d) for s, d in zip(shown, digits)]
    for point, lo, hi in triples:
        for t in ((point, lo, hi), (-point, -hi, -lo)):
            if all(round(v, d) == w for v, d, w in zip(t, digits, want)):
                return True
    return False


@pytest.mark.heavy
def test_every_interval_a_study_page_states_is_one_the_report_writes(written):
    unknown = []
    for doc in [README, *DOCS]:
        prose = " ".join(GENERATED.sub("", doc.read_text()).split())
        for m in TRIPLE.finditer(prose):
            shown = m.group(0).replace("×", "")
            if (doc.name, shown) not in PAST and not _written(m.groups(), written):
                unknown.append(f"{doc.name}: {m.group(0)!r} ...{prose[max(0, m.start() - 60) : m.start()]}")
    assert not unknown, "stated on a study page, written by no report now:\n" + "\n".join(unknown)


@pytest.mark.heavy
def test_a_number_no_report_wrote_is_caught(written):
    """The check can fail: the report's own figure off by one in its last digit is not a match."""
    point, lo, hi = next(t for t in written if 1 < t[0] < 5 and t[1] < t[0] < t[2])
    assert _written((f"{point:.2f}", f"{lo:.2f}", f"{hi:.2f}"), written)
    assert not _written((f"{point + 0.01:.2f}", f"{lo:.2f}", f"{hi:.2f}"), written)


def test_every_past_measurement_is_still_stated():
    """An exception no page states any more is removed, not kept."""
    for page, shown in PAST:
        assert shown in " ".join((ROOT / "docs" / "studies" / page).read_text().split()), (page, shown)

"""report's index.html and compare's --html page, opened in a real browser (headless Chromium,
Debian's package, driven by Playwright; setup.sh installs it where it can).

Both pages are written from committed baselines by the real CLI, then loaded at 1280 px and at
390 px (a phone): no console error, no page error, no request beyond the file itself (the page is
self-contained), no horizontal scroll of the page, no element past the right edge except inside a
box that scrolls on its own (wide tables), and every figure decoded with a non-zero size, all with
every folded block opened. report's answers block starts on the first screen at 1280 px (its top
within 1000 px, folded blocks as the page opens). A screenshot of the page's first 8,000 px at each width is
written beside the page for a human to look at.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
BASELINES = ROOT / "results" / "baselines"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (setup.sh installs Debian's where it can)"),
]
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOT_HEIGHT = 8000
# Where report's answers block starts (page coordinates, as the page opens: before LAYOUT opens
# every folded block); null on a page without one (compare's).
ANSWERS_TOP = """() => { const a = document.getElementById('answers');
  return a ? a.getBoundingClientRect().top + window.scrollY : null; }"""
# What the page would show wrong: the page itself wider than the viewport, or an element sticking
# out past the right edge that is not inside a box scrolling on its own.
LAYOUT = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const vw = document.documentElement.clientWidth;
  const inScroll = el => { for (let p = el.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return true; } return false; };
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > vw + 1 && !inScroll(el)) out.push(el.tagName + ' ' + Math.round(r.right));
  }
  return {pageWidth: document.documentElement.scrollWidth, viewport: vw, overflowing: out.slice(0, 10),
          scrollWidth: document.scrollingElement.scrollWidth, innerWidth: window.innerWidth,
          figures: [...document.images].map(i => ({ok: i.complete && i.naturalWidth > 0,
                     w: i.getBoundingClientRect().width, h: i.getBoundingClientRect().height}))};
}"""


def _look(browser, page_path: Path, width: int) -> tuple[list[str], dict]:
    """Open the page at ``width``; what went wrong while it loaded, and its layout."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    problems: list[str] = []

    def console(m) -> None:
        if m.type in ("error", "warning"):
            problems.append(f"console {m.type}: {m.text}")

    def request(r) -> None:
        if not r.url.startswith(("file:", "data:")):
            problems.append(f"request {r.url[:80]}")

    page.on("console", console)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", request)
    page.goto(page_path.as_uri())
    page.wait_for_load_state("load")
    top = page.evaluate(ANSWERS_TOP)
    info = page.evaluate(LAYOUT)
    info["answersTop"] = top
    # At most SHOT_HEIGHT px of the page: a taller capture (a phone-width page with every block
    # open runs to ~24,000 px) passes Chromium's texture limit and fails now and then under load
    # ("Unable to capture screenshot"), which is the browser's limit, not the page's fault.
    height = min(page.evaluate("() => document.documentElement.scrollHeight"), SHOT_HEIGHT)
    page.screenshot(
        path=str(page_path.with_name(f"{page_path.stem}-{width}px.png")),
        full_page=True,
        clip={"x": 0, "y": 0, "width": width, "height": height},
    )
    page.close()
    return problems, info


def _check(page_path: Path, figures: int, answers: bool = False) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for width in (1280, 390):
                problems, info = _look(browser, page_path, width)
                assert problems == [], (width, problems)
                assert info["pageWidth"] <= info["viewport"], (width, info["pageWidth"], info["overflowing"])
                assert info["scrollWidth"] <= info["innerWidth"] + 1, (width, info["scrollWidth"], info["overflowing"])
                if answers and width == 1280:  # the answers on the first screen
                    assert info["answersTop"] is not None and info["answersTop"] < 1000, info["answersTop"]
                assert info["overflowing"] == [], (width, info["overflowing"])
                assert len(info["figures"]) == figures, (width, info["figures"])
                assert all(f["ok"] and f["w"] > 50 and f["h"] > 50 for f in info["figures"]), (width, info["figures"])
        finally:
            browser.close()


def test_report_index_html_renders_in_a_browser(tmp_path):
    out = tmp_path / "report"
    res = CliRunner().invoke(app, ["report", str(BASELINES / "cpu-default"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    page = out / "index.html"
    text = page.read_text()
    # what the study answered comes before the provenance, the figures and the tables
    order = [
        text.index(h)
        for h in ("What this report answers", "Where the numbers come from", "<h2>Figures", "Tables and definitions")
    ]
    assert order == sorted(order)
    assert "20261204T184305Z-default" in text and "0.32.0" in text  # the run and its vLLM, from the manifest
    for figure in ("per_position.svg", "al_over_time.svg"):  # each figure says what it shows
        assert "20261204T184305Z-default · fixture:heads-target · k 3 · vLLM 0.32.0" in (out / figure).read_text()
    _check(page, figures=len(list(out.glob("*.svg"))), answers=True)
    assert (out / "index-390px.png").stat().st_size > 10_000


@pytest.mark.parametrize("name", ["cpu-seed-questions", "cpu-k-sweep"])
def test_other_report_pages_lead_with_their_answers(tmp_path, name):
    """The biggest matrix (12 speculative cells over three axes) and a k sweep: the answers on the
    first screen at 1280 px, nothing wider than a phone at 390 px."""
    out = tmp_path / "report"
    res = CliRunner().invoke(app, ["report", str(BASELINES / name), "--out", str(out)])
    assert res.exit_code == 0, res.output
    _check(out / "index.html", figures=len(list(out.glob("*.svg"))), answers=True)


def test_compare_html_renders_in_a_browser(tmp_path):
    page = tmp_path / "gate.html"
    res = CliRunner().invoke(
        app, ["compare", str(BASELINES / "cpu-gate"), str(BASELINES / "cpu-gate-rerun"), "--html", str(page)]
    )
    assert res.exit_code in (0, 3), res.output  # the verdict is not what this test is about
    text = page.read_text()
    assert text.index("specbench compare:") < text.index("The two runs")  # the verdict first
    _check(page, figures=1)

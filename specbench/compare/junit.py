"""JUnit XML for CI systems: one testcase per gate check (xml.etree, so the XML is well formed).

Cells and metrics are named as the terminal and Markdown name them (``MLA on · norm off``,
``AL``, ``p_0``). A failed check is a ``<failure>``; an inconclusive one an ``<error type="inconclusive">`` with the
reason (never a pass: a check that could not be decided must not turn a CI dashboard green). A check
that cannot fail (its tolerance reaches the metric's worst value) is ``<skipped>``: it tested nothing.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from specbench.compare.cellwise import Comparison
from specbench.compare.text import cell_titles, short_metric

# Characters XML 1.0 cannot hold at all (ElementTree writes them and the file no longer parses):
# shown as \xNN, like the terminal and the Markdown show them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def junit_xml(comp: Comparison) -> str:
    checks = comp.checks
    n = comp.counts
    # a check that cannot fail is reported as skipped: it tested nothing, so no dashboard counts it a pass
    attrs = dict(
        tests=str(len(checks)), failures=str(n["fail"]), errors=str(n["inconclusive"]), skipped=str(n["cannot_fail"])
    )
    suites = ET.Element("testsuites", {"name": "specbench compare", **attrs})
    suite = ET.SubElement(
        suites, "testsuite", {"name": f"specbench compare {comp.base_label} vs {comp.cand_label}", **attrs}
    )
    titles = cell_titles(comp)  # what the terminal and Markdown call the cells and metrics
    for g in checks:
        case = ET.SubElement(
            suite, "testcase", classname=titles.get(g.cell, g.cell), name=f"{short_metric(g.metric)} [{g.gate}]"
        )
        lines = [g.message, *g.notes]
        text = "\n".join([*lines, f"error rate: {g.control}" if g.control else ""]).strip()
        if g.status == "fail":
            ET.SubElement(case, "failure", message=g.message, type="regression").text = text
        elif g.status == "inconclusive":
            ET.SubElement(case, "error", message=f"inconclusive: {g.message}", type="inconclusive").text = text
        elif g.cannot_fail:
            ET.SubElement(case, "skipped", message=g.cannot_fail).text = text
        elif text:
            ET.SubElement(case, "system-out").text = text
    for el in suites.iter():  # every name, message and text came from the inputs
        el.attrib = {k: _x(v) for k, v in el.attrib.items()}
        if el.text:
            el.text = _x(el.text)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"

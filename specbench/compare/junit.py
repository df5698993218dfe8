"""JUnit XML for CI systems: one testcase per gate per cell (xml.etree, so the XML is well formed)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from specbench.compare.compare import Comparison


def junit_xml(comp: Comparison) -> str:
    cases = [(cell, g) for cell in comp.cells for g in cell.gates]
    failures = sum(1 for _, g in cases if g.status == "fail")
    suites = ET.Element("testsuites", name="specbench compare", tests=str(len(cases)), failures=str(failures))
    suite = ET.SubElement(suites, "testsuite", name=f"specbench compare {comp.base_label} vs {comp.cand_label}",
                          tests=str(len(cases)), failures=str(failures), errors="0")
    for cell, g in cases:
        case = ET.SubElement(suite, "testcase", classname=cell.name, name=f"{g.metric} [{g.gate}]")
        if g.status == "fail":
            ET.SubElement(case, "failure", message=g.message, type="regression").text = "\n".join([g.message, *g.notes])
        elif g.status == "skip":
            ET.SubElement(case, "skipped", message=g.message)
        elif g.message or g.notes:
            ET.SubElement(case, "system-out").text = "\n".join([g.message, *g.notes])
    for name in comp.only_base + comp.only_cand:
        side = "baseline" if name in comp.only_base else "candidate"
        case = ET.SubElement(suite, "testcase", classname=name, name="cell present on both sides")
        ET.SubElement(case, "skipped", message=f"only in {side}")
    total, skipped_all = len(suite), len(suite.findall("testcase/skipped"))
    for el in (suites, suite):
        el.set("tests", str(total))
    suite.set("skipped", str(skipped_all))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"

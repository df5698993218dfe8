"""compare's --html: one self-contained page for a gate, the verdict first.

The page is compare's own Markdown (headline, the gate grid with what each check could detect,
every metric of every cell folded) under both runs' provenance, with the per-position figure
(p_i of both sides over the change Δp_i) inlined as SVG.
"""

from __future__ import annotations

import io
from typing import Any

from specbench.render import html


def _side_rows(side: Any) -> dict[str, str]:
    m = side.manifest  # a Manifest, or None for a single file
    machine = m.machine if m is not None else None
    hw = ", ".join(str(x) for x in ((machine.hostname, machine.cpu_model) if machine else ()) if x)
    return {
        "run": str((m.run_id if m else None) or side.label),
        "vLLM": str((m.vllm_version if m else None) or "not recorded"),
        "machine": hw or "not recorded",
        "started": str((m.started_at if m else None) or "not recorded"),
        "specbench": str((m.specbench_version if m else None) or "not recorded"),
        "cells": str(len(side.cells)),
    }


def compare_html(comp: Any, base: Any, cand: Any, markdown_text: str, panels: list) -> str:
    """The page: verdict and gate grid (compare's Markdown), provenance of both runs, the figure."""
    b, c = _side_rows(base), _side_rows(cand)
    provenance = html.table(["", "baseline", "candidate"], [[k, b[k], c[k]] for k in b])
    body = [html.markdown(markdown_text), "<h2>The two runs</h2>", provenance]
    if any(p[1] is not None or p[2] is not None for p in panels):
        from specbench.render.plots.position_deltas import overlay_figure  # lazy: pulls in matplotlib

        buf = io.BytesIO()
        overlay_figure(panels, comp.confidence).savefig(buf, format="svg")
        body += [
            "<h2>Per-position acceptance</h2>",
            html.figure(
                buf.getvalue(),
                "Per cell: p_i of the baseline and the candidate (top), and the change Δp_i with its CI "
                "and the gate's tolerance (bottom)",
            ),
        ]
    return html.page("specbench compare", "\n".join(body))

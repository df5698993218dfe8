"""report's index.html: one self-contained page a reader opens first.

What the study answered comes first (the contrasts, speed-ups and k advice the screen prints), then
where the numbers come from (per run: model, draft, k, vLLM, attestation, load, machine, specbench),
the figures, every table of summary.md, and links to the files beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.analysis.acceptance import significant
from specbench.records.attestation import recorded_mismatches
from specbench.records.cell import Machine
from specbench.render import html
from specbench.results.store import Run

# figure file stem -> what it shows, in words (the page's captions and alt texts)
CAPTIONS = {
    "per_position": "Acceptance per draft position: p_i (share of drafts whose first i+1 tokens were "
    "accepted) and α_i (p_i / p_(i-1)), with their CIs",
    "al_over_time": "Acceptance length as the run went on (units so far, in order), with its CI: it "
    "should settle; a drift means the load changed under the measurement",
    "vs_reference": "Each cell against the reference cell: p_i of both with their CIs (top), and the change "
    "Δp_i with its CI (bottom; below 0 the cell accepts less than the reference)",
    "divergence": "Output divergence between cells: where two cells' greedy outputs first differ",
    "speedup": "Speed-up of each speculative cell over its no-speculation baseline (below 1× is slower)",
    "speedup_vs_concurrency": "Speed-up, AL and step cost per concurrency",
}


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _method_drafts(serve: Any) -> list[tuple[str, Any]]:
    """``serve.speculative.drafts`` (a method's own draft) as sorted pairs; none in older or damaged manifests."""
    drafts = _get(serve, "speculative", "drafts")
    return sorted((str(k), v) for k, v in drafts.items()) if isinstance(drafts, dict) else []


def _shown(value: Any) -> str:
    return "not recorded" if value in (None, "", [], {}) else str(value)


@dataclass
class Provenance:
    """Where a run's numbers come from: ``rows`` for the page, ``note`` (one line) for its figures."""

    rows: list[tuple[str, str]]
    note: str
    model: str | None = None  # the target as the config names it (a fixture's caveat reads it)


def run_provenance(run: Run) -> Provenance:
    """A run's provenance; what the run did not record says so."""
    m = run.manifest
    serve, load = _get(m.resolved_config, "serve") or {}, _get(m.resolved_config, "load") or {}
    cells = [c.record for c in run.cells.values()]
    specs = [c.spec for c in cells if c.spec is not None]
    ks = sorted({str(s.num_speculative_tokens) for s in specs if s.num_speculative_tokens is not None})
    methods = sorted({str(s.method) for s in specs if s.method})
    done = [c for c in cells if c.status == "done"]
    checked = [c for c in done if c.attested is not None]
    agree = [c for c in checked if not recorded_mismatches(c.spec, c.attested)]
    attested_vllm = sorted({str(c.attested.vllm_version) for c in checked if c.attested and c.attested.vllm_version})
    machine = m.machine or Machine()
    gpus = machine.gpus
    hw = ", ".join(
        x
        for x in (
            str(machine.cpu_model or ""),
            f"{machine.cpu_count} CPUs" if machine.cpu_count else "",
            f"{machine.memory_gib} GiB" if machine.memory_gib else "",
            f"{len(gpus)} GPU(s)" if gpus else "no GPU",
        )
        if x
    )
    workload = _get(load, "workload") or _get(load, "prompts", "path") or "built-in prompts"
    requests = load.get("num_requests")
    note = f"{run.run_id} · {_shown(serve.get('model'))} · k {', '.join(ks) or 'none'} · vLLM {_shown(m.vllm_version)}"
    rows = [
        ("run", f"{run.run_id} ({_shown(m.status)})"),
        ("when", f"{_shown(m.started_at)} → {_shown(m.ended_at)}"),
        ("config", f"{_shown(m.config_path)} (sha256 {str(m.config_sha256 or '')[:12] or '?'})"),
        ("model", _shown(serve.get("model"))),
        (
            "draft",
            f"{_shown(_get(serve, 'speculative', 'draft'))}"
            + "".join(f"; {k}: {_shown(v)}" for k, v in _method_drafts(serve))
            + (f"; method {', '.join(methods)}" if methods else ""),
        ),
        ("k (draft tokens per step)", ", ".join(ks) or "none"),
        (
            "vLLM",
            f"{_shown(m.vllm_version)}"
            + (f"; cells' servers said {', '.join(attested_vllm)}" if attested_vllm else ""),
        ),
        (
            "attested",
            f"{len(agree)} of {len(done)} finished cells ran what they asked for (checked against vLLM's own log lines)"
            + (f"; {len(done) - len(checked)} unchecked (no attestation recorded)" if len(checked) < len(done) else "")
            + (f"; {len(checked) - len(agree)} MISMATCHED" if len(agree) < len(checked) else ""),
        ),
        (
            "load",
            f"{_shown(load.get('driver'))} driver, {_shown(load.get('num_requests'))} requests per cell, "
            f"concurrency {_shown(load.get('concurrency'))}, max {_shown(load.get('max_tokens'))} tokens, "
            f"seed {_shown(load.get('seed'))}, workload {workload}",
        ),
        ("machine", f"{_shown(machine.hostname)}: {hw or 'not recorded'}"),
        ("specbench", _shown(m.specbench_version)),
    ]
    note += f" · {requests} requests per cell" if requests is not None else ""
    return Provenance(rows, note, None if serve.get("model") is None else str(serve.get("model")))


def figure_note(report: Any) -> str:
    """One line for every figure: which run(s), model, k, vLLM and load it shows."""
    return " | ".join(p.note for p in report.provenance) or f"from {report.source}"


def _significant(c: Any) -> bool:
    return any(iv is not None and significant(iv) for iv in c.intervals.values())


def _confounded(t: Any, comparisons: list[Any]) -> str:
    """What else the speculative cells of a throughput pair's two values differed in (attested), e.g.
    chunked prefill and prefix caching beside MLA on CPU: a throughput change is not the axis alone."""
    seen = sorted(
        {
            x
            for c in comparisons
            if (c.axis, c.cand_value, c.base_value) == (t.axis, t.cand_value, t.base_value)
            for x in c.confounds
        }
    )
    return f"; also differs in {', '.join(seen)} (attested)" if seen else ""


def findings(report: Any) -> str:
    """What the screen prints, arranged for reading: significant contrasts, then the rest folded;
    speed-ups as a table with what below 1× means; k advice; the study's warnings folded."""
    # lazy: numpy and the k-prediction model, only when a page is written
    from specbench.report.choosing_k import advice_lines
    from specbench.report.throughput import headline  # lazy: numpy, only when a page is written

    out: list[str] = []
    sig = [c for c in report.comparisons if _significant(c)]
    rest = [c for c in report.comparisons if not _significant(c)]
    if sig:
        out += ["<h3>Differences the data shows</h3>", html.bullets([c.sentence() for c in sig], "answers")]
    if rest:
        out.append(
            f"<details><summary>{len(rest)} contrast(s) with no significant difference</summary>"
            + html.bullets([c.sentence() for c in rest], "answers")
            + "</details>"
        )
    speedups = [(st, s) for st in report.studies for s in st.speedups]
    if speedups:
        rows = []
        for _, s in speedups:
            x, iv = s.point["output_tok_per_s"], s.intervals.get("output_tok_per_s")
            shown = f"{x:.2f}×" + (f" [{iv[0]:.2f}, {iv[1]:.2f}]" if iv else "")
            rows.append(
                [report.title(s.cell), shown, f"{s.spec['mean_acceptance_length']:.2f}", f"{s.point['cost_ratio']:.2f}"]
            )
        out += [
            "<h3>Speed-up over serving without speculation</h3>",
            html.table(
                ["cell", f"speed-up, output tok/s ({speedups[0][1].confidence:.0%} CI)", "AL", "step cost"], rows
            ),
            "<p>Speed-up ≈ AL / step cost, the step cost being one verify step's time in plain decode steps. "
            + (
                "Below 1× the cell is <strong>slower</strong> than serving without speculation: its step cost "
                "exceeds its AL (on a CPU a verify step costs several decode steps)."
                if any(s.point["output_tok_per_s"] < 1 for _, s in speedups)
                else "Every cell is faster than serving without speculation."
            )
            + "</p>",
        ]
    through = [t for st in report.studies for t in headline(st.throughputs)]
    if through:
        out += [
            "<h3>Throughput between cells</h3>",
            html.bullets([t.line() + _confounded(t, report.comparisons) for t in through]),
            "<p>Output tok/s of the first value over the second; the CI is widened by the spread between "
            "reruns, the within-run interval beside it. Every pair is in the table below.</p>",
        ]
    advice = [line for st in report.studies for line in advice_lines(st.kpredictions, report.title)]
    if advice:
        out += ["<h3>Draft length (k)</h3>", html.bullets(advice)]
    warnings = [w for st in report.studies for w in st.warnings]
    if warnings:
        out.append(
            f"<details><summary>{len(warnings)} warning(s) about divergence and speed-up</summary>"
            + html.bullets(warnings)
            + "</details>"
        )
    return "\n".join(out)


def _tables_of(markdown_text: str) -> str:
    """summary.md under the page's own headings: its title and file list dropped (the page has
    both), its sections one level down."""
    body = markdown_text.split("\n## Files\n", 1)[0]
    lines = body.split("\n")
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join("#" + line if line.startswith("## ") or line.startswith("### ") else line for line in lines)


def answers(report: Any) -> str:
    """The block the page opens with: the fixture caveat, then one short answer per question."""
    from specbench.report.answers import fixture_caveat, report_answers  # lazy: numpy, only when a page is written

    out = ['<section id="answers" class="answers">', "<h2>What this report answers</h2>"]
    caveat = fixture_caveat(report.provenance)
    if caveat:
        out.append(f'<p class="caveat"><strong>Caveat:</strong> {html.esc(caveat)}</p>')
    blocks = report_answers(report)
    for a in blocks:
        out.append(html.answer(a.question, a.lines, a.confounds, a.details))
    if not blocks:
        out.append(
            "<p>No two cells differ in one axis and no cell has a baseline: the tables below give each "
            "cell's own figures.</p>"
        )
    out.append("</section>")
    return "\n".join(out)


def index_html(report: Any, markdown_text: str, figures: list[Path], files: list[Path], out_dir: Path) -> str:
    """The page: the answers first, then (each folding) every finding, provenance, figures
    (``figures``: the SVGs written), tables and file links."""
    body = [
        "<h1>specbench acceptance report</h1>",
        f'<p class="lede">Inputs: {html.esc(report.source)}</p>',
        answers(report),
    ]
    found = findings(report)
    if found:
        body.append(html.section("Every contrast, speed-up and k advice", found))
    if report.provenance:
        body.append(
            html.section(
                "Where the numbers come from", "".join(html.provenance(p.rows) for p in report.provenance), True
            )
        )
    else:
        body.append("<p>Inputs are log, scrape or JSONL files: no run records what served them.</p>")
    if figures:
        shown = [html.figure(Path(svg).read_bytes(), CAPTIONS.get(Path(svg).stem, Path(svg).stem)) for svg in figures]
        body.append(html.section(f"Figures ({len(figures)})", "\n".join(shown), True))
    body.append(html.section("Tables and definitions", html.markdown(_tables_of(markdown_text))))
    body.append(html.section(f"Files ({len(files)})", html.links(files, out_dir)))
    return html.page("specbench report", "\n".join(body))

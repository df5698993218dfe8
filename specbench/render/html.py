"""Self-contained HTML pages: report's index.html and compare's --html.

One file, no network: the text is the command's own Markdown rendered by markdown-it (raw HTML in it
is shown as text, never run), figures are SVG inlined as data URIs, and the style sheet is inline.
The page fits a phone: wide tables scroll inside their own box, long names wrap anywhere.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

STYLE = """
:root { color-scheme: light; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg-alt: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0 auto; padding: 16px; max-width: 1180px; color: var(--fg);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; overflow-wrap: anywhere; }
h1 { font-size: 1.6em; margin: 0.2em 0 0.4em; } h2 { font-size: 1.3em; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.1em; }
.lede { color: var(--muted); }
.answers li { margin: 0.3em 0; }
.scroll { overflow-x: auto; max-width: 100%; margin: 0.6em 0; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top;
         overflow-wrap: normal; }
td { white-space: nowrap; } td:first-child, th:first-child { white-space: normal; min-width: 8em; }
tr:nth-child(even) td { background: var(--bg-alt); }
dl.prov { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0.4em 0 1em; }
dl.prov dt { color: var(--muted); } dl.prov dd { margin: 0; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 0.9em; }
details { margin: 0.5em 0; } summary { cursor: pointer; color: var(--muted); }
code { background: var(--bg-alt); padding: 0 3px; border-radius: 3px; }
.verdict { font-size: 1.15em; font-weight: 600; }
section.answers { margin: 0.4em 0 1.2em; }
.answer { border-left: 3px solid var(--line); padding: 0 0 0 12px; margin: 0.8em 0; }
.answer h3 { margin: 0.2em 0; } .answer ul { margin: 0.2em 0; padding-left: 1.2em; }
.answer .confound { margin: 0.2em 0; color: #7d4e00; }
.caveat { background: #fff8c5; border: 1px solid #d4a72c; padding: 6px 10px; border-radius: 4px; }
details.section > summary { list-style-position: inside; }
details.section > summary h2 { display: inline; border: 0; }
details.section { border-bottom: 1px solid var(--line); padding-bottom: 0.3em; }
svg, img, video, canvas { max-width: 100%; height: auto; }
"""


def esc(text: object) -> str:
    """Text as HTML text (``<``, ``&`` and quotes escaped); control characters shown, never run."""
    return html.escape(str(text), quote=True)


def markdown(text: str) -> str:
    """CommonMark with tables; raw HTML, images and links off (a hostile label stays text); tables
    wrapped to scroll."""
    # lazy: markdown-it only when a page is written
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.disable(["image", "link", "autolink"])  # a label can never make the page fetch or point anywhere
    # The one raw-HTML construct specbench's own Markdown writes (compare's folded details), kept as
    # such: a whole line, exactly as written, never a fragment of a value.
    summaries: list[str] = []

    def fold(m: re.Match[str]) -> str:
        summaries.append(m.group(1))
        return f"\n{_OPEN}{len(summaries) - 1}\n"

    text = re.sub(r"^<details><summary>([^<>\n]*)</summary>$", fold, text, flags=re.M)
    text = re.sub(r"^</details>$", f"\n{_CLOSE}\n", text, flags=re.M)
    out = md.render(text)
    for n, summary in enumerate(summaries):
        out = out.replace(f"<p>{_OPEN}{n}</p>", f"<details><summary>{esc(summary)}</summary>")
    out = out.replace(f"<p>{_CLOSE}</p>", "</details>")
    return out.replace("<table>", '<div class="scroll"><table>').replace("</table>", "</table></div>")


_OPEN, _CLOSE = "SPECBENCH-DETAILS-OPEN-", "SPECBENCH-DETAILS-CLOSE"


def figure(svg: bytes, caption: str) -> str:
    """An SVG figure inlined as a data URI (an <img>: its ids and styles never meet the page's)."""
    data = base64.b64encode(svg).decode("ascii")
    alt = esc(caption)
    return f'<figure><img src="data:image/svg+xml;base64,{data}" alt="{alt}"><figcaption>{alt}</figcaption></figure>'


def provenance(rows: list[tuple[str, str]]) -> str:
    """Name/value pairs as a definition list."""
    return '<dl class="prov">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows) + "</dl>"


def bullets(lines: list[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<ul{attr}>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>"


def answer(question: str, lines: list[str], confounds: list[str], details: list[str]) -> str:
    """One question's answer: its lines, what else differed (attested), the contrasts behind it folded."""
    out = f'<div class="answer"><h3>{esc(question)}</h3>' + bullets(lines)
    out += "".join(f'<p class="confound"><strong>Confound:</strong> {esc(c)}</p>' for c in confounds)
    if details:
        out += f"<details><summary>the {len(details)} contrast(s) behind it</summary>{bullets(details)}</details>"
    return out + "</div>"


def section(title: str, body: str, open_: bool = False) -> str:
    """A part of the page below the answers, under a heading that folds it (``open_``: shown at first)."""
    attr = " open" if open_ else ""
    return f'<details class="section"{attr}><summary><h2>{esc(title)}</h2></summary>\n{body}\n</details>'


def table(header: list[str], rows: list[list[str]]) -> str:
    """A plain table (text cells), in a box that scrolls when it is wider than the page."""
    head = "".join(f"<th>{esc(x)}</th>" for x in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def links(paths: list[Path], base: Path) -> str:
    """Relative links to the files beside the page."""
    items = []
    for p in paths:
        rel = Path(p).relative_to(base).as_posix() if Path(p).is_relative_to(base) else Path(p).name
        items.append(f'<li><a href="{esc(rel)}">{esc(rel)}</a></li>')
    return "<ul>" + "".join(items) + "</ul>"


def page(title: str, body: str) -> str:
    """The whole document."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )

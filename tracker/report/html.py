"""HTML of the report's pages: escaped text, verdict tables, figure slots. No file I/O.

Every value that may come from the database goes through ``esc`` (``html.escape`` with
quotes). Figures are embedded as plotly JSON in ``<script type="application/json">`` blocks
(plotly's serializer writes ``<``, ``>`` and ``/`` as ``\\u`` escapes, so no text can close
the block) and drawn by one small script with the plotly.js the page links relatively.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.analysis.verdict import FAIL, NA, PASS, Verdict
from tracker.figures.style import FONT, GRID, INK, MUTED, SURF

if TYPE_CHECKING:
    import plotly.graph_objects as go

STATUSES = (PASS, FAIL, NA)
STATUS_CLASS = {PASS: "pass", FAIL: "fail", NA: "na"}
PLOTLY_CONFIG = '{"responsive": true, "displaylogo": false}'


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class FigureSlot:
    """One figure of a page: its JSON (``pio.to_json``) or, when it has nothing, a note."""

    key: str  # unique within the page: the div id
    title: str
    json: str | None
    height: int
    note: str = ""


CSS = f"""
:root {{ --ink: {INK}; --muted: {MUTED}; --grid: {GRID}; --surf: {SURF};
  --pass: #0f7b0f; --pass-bg: #e3f4e1; --fail: #c62828; --fail-bg: #fde7e6;
  --na: #6b6962; --na-bg: #efeee9; --link: #1d5fb4; }}
* {{ box-sizing: border-box; }}
body {{ margin: 0; background: #f3f2ee; color: var(--ink);
  font: 14px/1.45 {FONT}; }}
header.top {{ background: var(--surf); border-bottom: 1px solid var(--grid);
  padding: 18px 32px 14px; }}
header.top h1 {{ margin: 0 0 4px; font-size: 20px; font-weight: 650; }}
header.top .sub {{ color: var(--muted); font-size: 13px; }}
main {{ max-width: 1280px; margin: 0 auto; padding: 20px 32px 48px; }}
a {{ color: var(--link); text-decoration: none; }}
a:hover {{ text-decoration: underline; }}
section.card {{ background: var(--surf); border: 1px solid var(--grid); border-radius: 8px;
  padding: 18px 22px; margin: 0 0 22px; }}
section.card > h2 {{ margin: 0 0 10px; font-size: 18px; font-weight: 650;
  display: flex; flex-wrap: wrap; align-items: center; gap: 10px; }}
h3 {{ font-size: 15px; font-weight: 600; margin: 18px 0 8px; }}
.muted {{ color: var(--muted); }}
.chips {{ display: inline-flex; gap: 6px; flex-wrap: wrap; }}
.chip {{ display: inline-block; border-radius: 999px; padding: 1px 10px; font-size: 12.5px;
  font-weight: 600; border: 1px solid transparent; white-space: nowrap; }}
.chip.pass, .badge.pass {{ color: var(--pass); background: var(--pass-bg);
  border-color: #b7dfb3; }}
.chip.fail, .badge.fail {{ color: var(--fail); background: var(--fail-bg);
  border-color: #f3b5b1; }}
.chip.na, .badge.na {{ color: var(--na); background: var(--na-bg); border-color: var(--grid); }}
.chip.zero {{ opacity: 0.45; }}
.badge {{ display: inline-block; min-width: 44px; text-align: center; border-radius: 4px;
  padding: 0 6px; font-size: 12px; font-weight: 700; letter-spacing: 0.02em;
  border: 1px solid transparent; }}
table {{ border-collapse: collapse; width: 100%; font-size: 13px; }}
th {{ text-align: left; font-weight: 600; color: var(--muted); border-bottom: 1px solid var(--grid);
  padding: 6px 8px; position: sticky; top: 0; background: var(--surf); }}
td {{ padding: 5px 8px; border-bottom: 1px solid var(--grid); vertical-align: top; }}
td.num {{ font-variant-numeric: tabular-nums; white-space: nowrap; text-align: right; }}
th.num {{ text-align: right; }}
tr.fail td {{ background: #fff6f5; }}
tr.fail td:first-child {{ box-shadow: inset 3px 0 0 var(--fail); }}
tr.pass td:first-child {{ box-shadow: inset 3px 0 0 var(--pass); }}
tr.na td:first-child {{ box-shadow: inset 3px 0 0 var(--grid); }}
td.detail {{ color: #3d3c38; }}
code, .mono {{ font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 12.5px; }}
.scroll {{ max-height: 460px; overflow: auto; border: 1px solid var(--grid); border-radius: 6px; }}
.scroll table th {{ z-index: 1; }}
dl.meta {{ display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; margin: 0;
  font-size: 13px; }}
dl.meta dt {{ color: var(--muted); }}
dl.meta dd {{ margin: 0; overflow-wrap: anywhere; }}
ul.notes {{ margin: 10px 0 0; padding: 8px 12px 8px 28px; background: #fff8e6;
  border: 1px solid #f0dfae; border-radius: 6px; }}
ul.notes li {{ margin: 2px 0; }}
.figure {{ margin: 14px 0 0; border: 1px solid var(--grid); border-radius: 6px;
  background: var(--surf); overflow: hidden; }}
.figure .plot {{ width: 100%; }}
.figure .empty {{ padding: 18px 16px; color: var(--muted); }}
.figure .empty strong {{ color: var(--ink); font-weight: 600; }}
.figure .cap {{ padding: 6px 12px; border-top: 1px solid var(--grid); font-size: 12.5px;
  color: var(--muted); }}
.overview td.name {{ font-weight: 600; }}
.warn {{ display: none; padding: 10px 14px; margin: 0 0 16px; border-radius: 6px;
  background: var(--fail-bg); color: var(--fail); border: 1px solid #f3b5b1; }}
nav.crumbs {{ font-size: 13px; margin-bottom: 4px; }}
.badge.regressed {{ color: var(--fail); background: var(--fail-bg); border-color: #f3b5b1; }}
.badge.fixed {{ color: var(--pass); background: var(--pass-bg); border-color: #b7dfb3; }}
.badge.changed {{ color: #8a5a00; background: #fff3d6; border-color: #f0dfae; }}
.badge.new, .badge.gone, .badge.same {{ color: var(--na); background: var(--na-bg);
  border-color: var(--grid); }}
.badge.same {{ opacity: 0.6; }}
tr.regressed td {{ background: #fff6f5; }}
tr.regressed td:first-child {{ box-shadow: inset 3px 0 0 var(--fail); }}
tr.fixed td:first-child {{ box-shadow: inset 3px 0 0 var(--pass); }}
tr.changed td:first-child {{ box-shadow: inset 3px 0 0 #e0a800; }}
.grid2 {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr));
  gap: 0 16px; }}
.regressions {{ margin: 6px 0 12px; padding: 8px 14px; border-radius: 6px;
  background: var(--fail-bg); border: 1px solid #f3b5b1; }}
.regressions.none {{ background: var(--pass-bg); border-color: #b7dfb3; color: var(--pass); }}
.regressions strong {{ color: var(--fail); }}
.regressions ul {{ margin: 4px 0 0; padding-left: 22px; }}
table.bpp {{ width: auto; min-width: 50%; margin-top: 10px; }}
td.off {{ color: var(--fail); font-weight: 600; }}
.rise {{ color: var(--fail); font-size: 11.5px; margin-left: 4px; }}
.absent {{ color: var(--muted); font-style: italic; }}
p.crossjob-note {{ margin: 0 0 22px; }}
.fail-text {{ color: var(--fail); }}
"""

RENDER_JS = (
    "(function(){var w=document.getElementById('plotly-missing');"
    "if(!window.Plotly){if(w)w.style.display='block';return;}"
    "document.querySelectorAll('div.plot[data-figure]').forEach(function(div){"
    "var fig=JSON.parse(document.getElementById(div.dataset.figure).textContent);"
    f"Plotly.newPlot(div,fig.data,fig.layout,{PLOTLY_CONFIG});}});}})();"
)


def page(title: str, body: str, *, plotly_src: str, heading: str, sub: str = "") -> str:
    """A whole page. ``title``/``heading``/``sub`` are HTML already (escape before)."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{CSS}</style>\n"
        f'<script charset="utf-8" src="{esc(plotly_src)}"></script>\n'
        "</head>\n<body>\n"
        f'<header class="top"><h1>{heading}</h1><div class="sub">{sub}</div></header>\n'
        "<main>\n"
        f'<div class="warn" id="plotly-missing">{esc(plotly_src)} could not be loaded: '
        "figures cannot be drawn. Keep the report's folder together.</div>\n"
        f"{body}\n</main>\n<script>{RENDER_JS}</script>\n</body>\n</html>\n"
    )


def figure_html(slot: FigureSlot, caption: str = "") -> str:
    cap = f'<div class="cap">{caption}</div>' if caption else ""
    if slot.json is None:
        return (
            f'<div class="figure"><div class="empty"><strong>{esc(slot.title)}</strong>: '
            f"{esc(slot.note)}</div>{cap}</div>"
        )
    data_id = f"{slot.key}-data"
    return (
        f'<div class="figure"><div class="plot" id="{esc(slot.key)}" '
        f'data-figure="{esc(data_id)}" style="height:{int(slot.height)}px"></div>'
        f'<script type="application/json" id="{esc(data_id)}">{slot.json}</script>{cap}</div>'
    )


def figure_slot(fig: go.Figure, key: str, title: str, height: int) -> FigureSlot:
    """A figure's slot: its JSON, or, when it has no trace, the note it shows instead."""
    import plotly.io as pio

    if len(fig.data) == 0:
        texts = [a.text for a in fig.layout.annotations or () if a.text]
        # the note was escaped for plotly; the page escapes it again itself
        note = html.unescape(texts[0]) if texts else "nothing to draw"
        return FigureSlot(key=key, title=title, json=None, height=height, note=note)
    return FigureSlot(
        key=key,
        title=title,
        json=pio.to_json(fig, validate=False, remove_uids=True),
        height=height,
    )


def fmt_value(value: object) -> str:
    """A measured/expected/tolerance value for a table cell (plain text, not escaped)."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.6g}"
    return str(value)


def counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    tally = Counter(v.status for v in verdicts)
    return {status: tally.get(status, 0) for status in STATUSES}


def chips(tally: dict[str, int]) -> str:
    parts = []
    for status in STATUSES:
        n = tally.get(status, 0)
        zero = " zero" if n == 0 else ""
        parts.append(
            f'<span class="chip {STATUS_CLASS[status]}{zero}" data-status="{esc(status)}">'
            f"{n} {esc(status)}</span>"
        )
    return f'<span class="chips">{"".join(parts)}</span>'


def verdict_table(verdicts: Sequence[Verdict], *, failures_first: bool = False) -> str:
    if not verdicts:
        return '<p class="muted">No verdicts: nothing in this job could be checked.</p>'
    rows = list(verdicts)
    if failures_first:
        rank = {FAIL: 0, PASS: 1, NA: 2}
        rows.sort(key=lambda v: rank.get(v.status, 3))
    body = []
    for v in rows:
        cls = STATUS_CLASS.get(v.status, "na")
        body.append(
            f'<tr class="{cls}"><td><span class="badge {cls}">{esc(v.status)}</span></td>'
            f'<td class="mono">{esc(v.check)}</td><td>{esc(v.subject)}</td>'
            f'<td class="num">{esc(fmt_value(v.measured))}</td>'
            f'<td class="num">{esc(fmt_value(v.expected))}</td>'
            f'<td class="num">{esc(fmt_value(v.tolerance))}</td>'
            f'<td class="detail">{esc(v.detail)}</td></tr>'
        )
    return (
        '<div class="scroll"><table class="verdicts"><thead><tr><th>status</th><th>check</th>'
        '<th>subject</th><th class="num">measured</th><th class="num">expected</th>'
        '<th class="num">tolerance</th><th>detail</th></tr></thead><tbody>'
        + "".join(body)
        + "</tbody></table></div>"
    )


def notes_html(notes: Sequence[str]) -> str:
    if not notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>"


def meta_html(items: Sequence[tuple[str, str]]) -> str:
    return (
        '<dl class="meta">'
        + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
        + "</dl>"
    )

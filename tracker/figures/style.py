"""Colours, labels and layout shared by the report's figures (those of the study's script);
the variants' and arms' labels and colours are the study files' (``study_styles``).

Figures are plain plotly.js figure dicts (``{"data": [...], "layout": {...}}``), not
``plotly.graph_objects``: building and validating graph objects cost more than the rest of a
job's report, and importing them another 0.2 s per process. ``tracker.jsonio.to_figure_json``
writes them.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from tracker.analysis.study_looks import spare_colors, study_styles
from tracker.summary.arms import split_arm

# A figure as plotly.js takes it: "data" (list of trace dicts) and "layout" (a dict).
Figure = dict[str, Any]
INK, MUTED, GRID, SURF = "#0b0b0b", "#898781", "#e1e0d9", "#fcfcfb"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"


def plot_text(value: object) -> str:
    """Text from the database made literal for plotly, which renders some HTML in labels.

    ``<``, ``>`` and ``&`` become entities; plotly.js decodes those back when it draws, so the
    text shows exactly as stored and no tag of it is interpreted.
    """
    return html.escape(str(value), quote=False)


def variant_label(variant: str) -> str:
    """A variant's label (plain text, not yet escaped): its study's, else its name."""
    look = study_styles().variants.get(variant)
    return variant if look is None else look.label


class Palette:
    """The studies' colour for their variants; for others, spare colours (none a study's) in
    order of appearance."""

    def __init__(self) -> None:
        self._extra: dict[str, str] = {}

    def __call__(self, variant: str) -> str:
        look = study_styles().variants.get(variant)
        if look is not None:
            return look.color
        if variant not in self._extra:
            spare = spare_colors()
            self._extra[variant] = spare[len(self._extra) % len(spare)]
        return self._extra[variant]


def arm_style(arm: str, palette: Palette) -> tuple[str, str, str]:
    """Label (plain text, not yet escaped), colour and dash of a training arm."""
    look = study_styles().arms.get(arm)
    if look is not None:
        return look.label, look.color, "solid"
    variant, seed = split_arm(arm)
    label = variant_label(variant)
    if seed is not None:
        label = f"{label} (seed{seed})"
    return label, palette(variant), "solid" if not seed else "dash"


# characters of a title line: the toolbar leaves ~60% of a half-width figure to the title
TITLE_WIDTH = 56
AXIS: dict[str, Any] = dict(gridcolor=GRID, color=MUTED, linecolor=GRID, zeroline=False)


def layout(title: str, height: int, **overrides: Any) -> dict[str, Any]:
    """The study's look as a layout dict: system-ui font, ink text, muted axes, light grid.

    (plotly.js's own defaults are those of plotly.py's "none" template.)
    """
    settings: dict[str, Any] = dict(
        # from the top of the figure (a wrapped title's lines go down from there)
        title=dict(
            text=wrap_title(title),
            x=0.01,
            xanchor="left",
            yref="container",
            y=1,
            yanchor="top",
            pad=dict(t=12),
            font=dict(size=16),
        ),
        font=dict(family=FONT, color=INK, size=12),
        paper_bgcolor=SURF,
        plot_bgcolor=SURF,
        height=height,
        margin=dict(l=70, r=30, t=100, b=70),
        legend=dict(orientation="h", y=1.1, x=0, yanchor="bottom"),
        hoverlabel=dict(font=dict(family=FONT)),
        xaxis=dict(AXIS),
        yaxis=dict(AXIS),
    )
    settings.update(overrides)
    return settings


# what a legend entry takes: its line symbol and gap, and a character of its text (in em,
# on the wide side: an overestimate leaves a blank row, an underestimate covers the plot)
LEGEND_SYMBOL_PX = 46
LEGEND_CHAR_EM = 0.62
TITLE_LINE_PX = 21  # a line of the 16 px title


def legend_under_title(fig: Figure, width: int) -> Figure:
    """``fig`` with its horizontal legend placed under its title, in rows counted for a
    figure ``width`` px wide, and the top margin and the height grown by those rows: a
    legend anchored to the plot grows upwards over the title when it takes several rows."""
    settings = fig["layout"]
    names = [
        html.unescape(str(trace["name"]))
        for trace in fig["data"]
        if trace.get("name") and trace.get("showlegend", True)
    ]
    if not names:
        return fig
    legend = settings.setdefault("legend", {})
    size = legend.get("font", {}).get("size", 12)
    margin = settings.setdefault("margin", {})
    room = width - margin.get("l", 80) - margin.get("r", 80)
    rows, used = 1, 0.0
    for name in names:
        entry = LEGEND_SYMBOL_PX + LEGEND_CHAR_EM * size * len(name)
        if used and used + entry > room:
            rows, used = rows + 1, 0.0
        used += entry
    title_px = 12 + TITLE_LINE_PX * (str(settings["title"]["text"]).count("<br>") + 1) + 6
    top = title_px + rows * (size + 9) + 14
    grown = max(0, top - margin.get("t", 100))
    settings["height"] = settings["height"] + grown
    margin["t"] = max(top, margin.get("t", 100))
    legend.update(
        orientation="h",
        x=0,
        xanchor="left",
        yref="container",
        y=1 - title_px / settings["height"],
        yanchor="top",
    )
    return fig


def wrap_title(text: str, width: int = TITLE_WIDTH) -> str:
    """``text`` broken into lines of at most ``width`` characters at spaces: a long title
    would run under the plot's toolbar, which sits at its top right."""
    if len(text) <= width or "<br>" in text:
        return text
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def wrap_lines(lines: Sequence[str], width: int) -> list[str]:
    """Footnote lines broken at spaces into lines of at most ``width`` characters: an
    annotation does not wrap by itself and runs off the figure's right edge."""
    return [part for line in lines for part in wrap_title(line, width).split("<br>")]


def axis(**settings: Any) -> dict[str, Any]:
    return {**AXIS, **settings}


def columns(widths: tuple[float, ...], spacing: float) -> list[list[float]]:
    """x domains of side-by-side panels (as ``make_subplots(column_widths=...)``)."""
    usable = 1.0 - spacing * (len(widths) - 1)
    total = sum(widths)
    domains, left = [], 0.0
    for width in widths:
        right = left + usable * width / total
        domains.append([left, min(right, 1.0)])
        left = right + spacing
    return domains


def panel_title(text: str, domain: list[float]) -> dict[str, Any]:
    return dict(
        text=text,
        x=(domain[0] + domain[1]) / 2,
        xref="paper",
        xanchor="center",
        y=1.0,
        yref="paper",
        yanchor="bottom",
        showarrow=False,
        font=dict(size=14),
    )


def hline(y: float, label: str, xref: str = "x", yref: str = "y") -> tuple[dict, dict]:
    """A dotted muted line across a panel at ``y``, labelled at its right end."""
    return _dotted_line(f"{xref} domain", (0, 1), yref, (y, y), label, at=(1, y), anchor="bottom")


def vline(x: float, label: str, xref: str = "x", yref: str = "y") -> tuple[dict, dict]:
    """A dotted muted vertical line at ``x``, labelled at its top, on its left."""
    return _dotted_line(xref, (x, x), f"{yref} domain", (0, 1), label, at=(x, 1), anchor="top")


def _dotted_line(
    xref: str,
    xs: tuple[float, float],
    yref: str,
    ys: tuple[float, float],
    label: str,
    *,
    at: tuple[float, float],
    anchor: str,
) -> tuple[dict, dict]:
    """A dotted muted line shape from ``(xs[0], ys[0])`` to ``(xs[1], ys[1])`` and its label,
    right-aligned at ``at``."""
    shape = dict(
        type="line",
        xref=xref,
        x0=xs[0],
        x1=xs[1],
        yref=yref,
        y0=ys[0],
        y1=ys[1],
        line=dict(dash="dot", color=MUTED, width=1.5),
    )
    text = dict(
        text=label,
        xref=xref,
        x=at[0],
        xanchor="right",
        yref=yref,
        y=at[1],
        yanchor=anchor,
        showarrow=False,
        font=dict(color=MUTED),
    )
    return shape, text


def note(text: str) -> dict[str, Any]:
    """Why a figure has nothing to draw, in the middle of its plot area."""
    return dict(
        text=text,
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
        font=dict(color=MUTED, size=14),
    )


def empty_figure(title: str, height: int, text: str) -> Figure:
    """A figure without traces that says why (``text`` already escaped with ``plot_text``)."""
    return figure(
        layout=layout(
            title,
            height,
            annotations=[note(text)],
            xaxis=dict(visible=False),
            yaxis=dict(visible=False),
        )
    )


def short_list(names: list[str], limit: int = 6) -> str:
    """The first ``limit`` names, comma-separated, and how many more there are."""
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def footnote(text: str) -> dict[str, Any]:
    """A muted line under the plot area (text already escaped with ``plot_text``)."""
    return dict(
        text=text,
        xref="paper",
        yref="paper",
        x=0,
        y=0,
        yshift=-58,
        xanchor="left",
        yanchor="top",
        showarrow=False,
        align="left",
        font=dict(color=MUTED, size=11),
    )


def figure(
    data: list[dict[str, Any]] | None = None, layout: dict[str, Any] | None = None
) -> Figure:
    return {"data": data or [], "layout": layout or {}}


def scatter(**settings: Any) -> dict[str, Any]:
    return {"type": "scatter", **settings}


def bar(**settings: Any) -> dict[str, Any]:
    return {"type": "bar", **settings}


def footnote_lines(lines: Sequence[str], shift: int = -62) -> dict[str, Any]:
    """Muted lines under the plot (texts already escaped), below the x axis title."""
    note = footnote("<br>".join(lines))
    note["yshift"] = shift
    return note

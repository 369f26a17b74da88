"""The paper's Table 4 (Llama-3.1-8B GiB) against the job's extrapolated measurements."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracker.analysis.checks import TABLE4_LABELS
from tracker.analysis.verdict import FAIL, NA, Verdict
from tracker.figures.style import (
    INK,
    MUTED,
    Figure,
    Palette,
    axis,
    bar,
    columns,
    empty_figure,
    figure,
    footnote,
    layout,
    panel_title,
    plot_text,
)

CHECKS = TABLE4_LABELS
FAIL_COLOR = "#c62828"
PAPER_FILL = "#d9d7cf"
LEGEND_SWATCH = "#5c6f82"
TITLE = "Table 4, Llama-3.1-8B: extrapolated from measured bytes/param vs paper"
HEIGHT = 440


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def table4(verdicts: Iterable[Verdict]) -> Figure:
    """Grouped bars per variant: extrapolated GiB vs the paper's, for params and optimizer.

    Reads the ``table4_params_gib`` / ``table4_optim_gib`` verdicts (subject: the variant;
    measured: the extrapolation; expected: the paper; tolerance: absolute GiB, drawn as an
    error bar on the paper's bar). Extrapolated bars carry the variant's colour; a FAIL is
    outlined in red and says so above the bar. A figure without verdicts says why.
    """
    rows = [v for v in verdicts if v.check in CHECKS]
    if not rows:
        return empty_figure(
            TITLE, HEIGHT, "no Table 4 verdicts in this job (no memory probes to extrapolate)"
        )
    subjects = list(dict.fromkeys(v.subject for v in rows))
    labels = [plot_text(s) for s in subjects]
    palette = Palette()
    colors = [palette(s) for s in subjects]
    domains = columns((1.0, 1.0), 0.1)
    traces = []
    panels: dict[str, Any] = {}
    for index, check in enumerate(CHECKS):
        suffix = "" if index == 0 else str(index + 1)
        by_subject = {v.subject: v for v in rows if v.check == check}
        found = [by_subject.get(s) for s in subjects]
        traces.append(_extrapolated_bars(found, labels, colors, suffix))
        traces.append(_paper_bars(found, labels, suffix, in_legend=index == 0))
        panels[f"xaxis{suffix}"] = axis(domain=domains[index], anchor=f"y{suffix}")
        panels[f"yaxis{suffix}"] = axis(
            anchor=f"x{suffix}", rangemode="tozero", title=dict(text="GiB" if index == 0 else "")
        )
    # the measured bars take their variant's colour: the legend shows a neutral swatch
    traces.append(
        bar(
            x=[None],
            y=[None],
            name="extrapolated from this job (coloured by variant)",
            legendgroup="measured",
            marker=dict(color=LEGEND_SWATCH),
            hoverinfo="skip",
            legendrank=1,
        )
    )
    notes = [
        panel_title(name, domain) for name, domain in zip(CHECKS.values(), domains, strict=True)
    ]
    missing = sorted({v.subject for v in rows if _number(v.measured) is None})
    if missing:
        notes.append(footnote("no measurement for " + ", ".join(plot_text(s) for s in missing)))
    return figure(
        data=traces,
        layout=layout(
            TITLE,
            HEIGHT,
            barmode="group",
            bargap=0.25,
            bargroupgap=0.05,
            annotations=notes,
            **panels,
        ),
    )


def _extrapolated_bars(
    found: list[Verdict | None], labels: list[str], colors: list[str], suffix: str
) -> dict[str, Any]:
    """One panel's bars extrapolated from the job (a verdict per variant, or None), in the
    variants' colours; a FAIL outlined in red and named above its bar."""
    measured = [_number(v.measured) if v else None for v in found]
    status = [v.status if v else NA for v in found]
    failed = [s == FAIL for s in status]
    return bar(
        x=labels,
        y=measured,
        name="extrapolated from this job",
        legendgroup="measured",
        showlegend=False,
        marker=dict(
            color=colors,
            line=dict(color=[FAIL_COLOR if f else "rgba(0,0,0,0)" for f in failed], width=2.5),
        ),
        text=[
            "" if m is None else f"{m:.1f}" + ("<br>FAIL" if f else "")
            for m, f in zip(measured, failed, strict=True)
        ],
        textposition="outside",
        textfont=dict(color=[FAIL_COLOR if f else INK for f in failed], size=12),
        constraintext="none",
        customdata=status,
        hovertemplate="%{x}: %{y:.1f} GiB extrapolated (%{customdata})<extra></extra>",
        cliponaxis=False,
        xaxis=f"x{suffix}",
        yaxis=f"y{suffix}",
    )


def _paper_bars(
    found: list[Verdict | None], labels: list[str], suffix: str, *, in_legend: bool
) -> dict[str, Any]:
    """One panel's bars of the paper's values, the tolerance as an error bar."""
    expected = [_number(v.expected) if v else None for v in found]
    tolerance = [(_number(v.tolerance) or 0.0) if v else 0.0 for v in found]
    return bar(
        x=labels,
        y=expected,
        name="paper (tolerance as error bar)",
        legendgroup="paper",
        showlegend=in_legend,
        marker=dict(color=PAPER_FILL, line=dict(color=MUTED, width=1)),
        error_y=dict(type="data", array=tolerance, color=MUTED, thickness=1.2, width=5),
        text=["" if e is None else f"{e:.1f}" for e in expected],
        # at the bar's foot: the tolerance's error bar crosses its top
        textposition="inside",
        insidetextanchor="start",
        textangle=0,
        textfont=dict(color="#55534d", size=12),
        hovertemplate="%{x}: %{y:.1f} GiB in the paper<extra></extra>",
        cliponaxis=False,
        xaxis=f"x{suffix}",
        yaxis=f"y{suffix}",
    )

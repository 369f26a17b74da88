"""One figure of merit across jobs (``tracker.queries.tables.trend``), for the live server:
one figure per model, one line per variant in the study's colours, over job time as the
report's figures across jobs draw it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracker.figures.style import (
    Figure,
    Palette,
    axis,
    empty_figure,
    figure,
    layout,
    legend_under_title,
    plot_text,
    scatter,
    variant_label,
)

if TYPE_CHECKING:
    import polars as pl

HEIGHT = 420
WIDTH = 760  # the narrowest the page draws it
TIME_TITLE = "job time (time metadata, else ingest time)"
BAND_OPACITY = 0.15


def trend_figures(table: pl.DataFrame, metric: str) -> list[tuple[str, Figure]]:
    """(model, its figure) per model in the table's order; one empty figure saying so when
    no job has a value."""
    if table.height == 0:
        title = f"{plot_text(metric)} across jobs"
        return [("", empty_figure(title, HEIGHT, f"no value of {plot_text(metric)} in these jobs"))]
    return [
        (str(model), _model_figure(part, str(model), metric))
        for (model,), part in table.partition_by("model", as_dict=True, maintain_order=True).items()
    ]


def _model_figure(table: pl.DataFrame, model: str, metric: str) -> Figure:
    """One line per variant of one model over job time, hover naming the job; under each
    line the value its study expects (dotted) and the tolerance around it (shaded)."""
    palette = Palette()
    traces = []
    for (variant,), part in table.partition_by(
        "variant", as_dict=True, maintain_order=True
    ).items():
        name = plot_text(variant_label(str(variant)))
        color = palette(str(variant))
        x = [time.isoformat() for time in part.get_column("time")]
        traces += _target_traces(part, x, name, color)
        traces.append(
            scatter(
                x=x,
                y=part.get_column("value").to_list(),
                customdata=[plot_text(job) for job in part.get_column("job")],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                line=dict(color=color),
                marker=dict(color=color, size=7),
                hovertemplate="%{customdata}<br>%{x}<br>%{y:.6g}<extra>%{fullData.name}</extra>",
            )
        )
    fig = figure(
        traces,
        layout(
            f"{plot_text(metric)} of {plot_text(model)} across jobs",
            HEIGHT,
            xaxis=axis(type="date", title=dict(text=TIME_TITLE)),
            yaxis=axis(title=dict(text=plot_text(metric))),
        ),
    )
    return legend_under_title(fig, WIDTH)


def _target_traces(part: pl.DataFrame, x: list[str], name: str, color: str) -> list[Figure]:
    """The tolerance band (one closed shape, lower edge back under the upper) and the
    expected value's dotted line of one variant, over the jobs whose study expects one."""
    known = [i for i, value in enumerate(part.get_column("expected")) if value is not None]
    if not known:
        return []
    at = [x[i] for i in known]
    expected = [part.get_column("expected")[i] for i in known]
    lower = [part.get_column("tolerance_lower")[i] for i in known]
    upper = [part.get_column("tolerance_upper")[i] for i in known]
    band = scatter(
        x=at + at[::-1],
        y=upper + lower[::-1],
        mode="lines",
        fill="toself",
        fillcolor=color,
        opacity=BAND_OPACITY,
        line=dict(width=0),
        name=f"{name}: tolerance",
        legendgroup=name,
        showlegend=False,  # the expected line's entry names both
        hoverinfo="skip",
    )
    # one job: a line and a band of no width would not show; a dash with the band as its bar
    alone = dict(
        mode="markers",
        marker=dict(symbol="line-ew-open", size=18, color=color),
        error_y=dict(
            type="data",
            array=[upper[0] - expected[0]],
            arrayminus=[expected[0] - lower[0]],
            color=color,
            thickness=6,
            width=0,
        ),
    )
    line = scatter(
        x=at,
        y=expected,
        customdata=list(zip(lower, upper, strict=True)),
        **(alone if len(known) == 1 else dict(mode="lines")),
        name=f"{name}: expected \u00b1 tolerance",
        legendgroup=name,
        line=dict(color=color, dash="dot", width=1.5),
        hovertemplate=(
            "expected %{y:.6g}<br>tolerance %{customdata[0]:.6g} to %{customdata[1]:.6g}"
            "<extra>%{fullData.name}</extra>"
        ),
    )
    return [band, line]

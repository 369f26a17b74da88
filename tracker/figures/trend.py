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
    """One line per variant of one model over job time; hover names the job."""
    palette = Palette()
    traces = [
        scatter(
            x=[time.isoformat() for time in part.get_column("time")],
            y=part.get_column("value").to_list(),
            customdata=[plot_text(job) for job in part.get_column("job")],
            mode="lines+markers",
            name=plot_text(variant_label(str(variant))),
            line=dict(color=palette(str(variant))),
            marker=dict(color=palette(str(variant)), size=7),
            hovertemplate="%{customdata}<br>%{x}<br>%{y:.6g}<extra>%{fullData.name}</extra>",
        )
        for (variant,), part in table.partition_by(
            "variant", as_dict=True, maintain_order=True
        ).items()
    ]
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

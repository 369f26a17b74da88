"""One figure of merit across jobs (``tracker.queries.tables.trend``), for the live server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracker.figures.style import (
    Figure,
    Palette,
    axis,
    empty_figure,
    figure,
    layout,
    plot_text,
    scatter,
)

if TYPE_CHECKING:
    import polars as pl

HEIGHT = 460


def trend_figure(table: pl.DataFrame, metric: str) -> Figure:
    """One line per (model, variant) over the jobs in job order; hover names the job."""
    title = f"{plot_text(metric)} across jobs"
    if table.height == 0:
        return empty_figure(title, HEIGHT, f"no value of {plot_text(metric)} in these jobs")
    jobs = [plot_text(job) for job in table.get_column("job").unique(maintain_order=True)]
    palette = Palette()
    traces = [
        scatter(
            x=[plot_text(job) for job in part.get_column("job")],
            y=part.get_column("value").to_list(),
            customdata=part.get_column("time").to_list(),
            mode="lines+markers",
            name=plot_text(f"{model} / {variant}"),
            line=dict(color=palette(str(variant))),
            hovertemplate="%{x}<br>%{customdata}<br>%{y:.6g}<extra>%{fullData.name}</extra>",
        )
        for (model, variant), part in table.partition_by(
            ["model", "variant"], as_dict=True, maintain_order=True
        ).items()
    ]
    return figure(
        traces,
        layout(
            title,
            HEIGHT,
            xaxis=axis(type="category", categoryorder="array", categoryarray=jobs),
            yaxis=axis(title=dict(text=plot_text(metric))),
        ),
    )

"""``tracker export``: raw curve points as Parquet, for SQL engines (DuckDB, polars, Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracker.cli.base import JobFilter, WhereFilter, app, state, where_pairs


@app.command("export")
def export(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", file_okay=False, help="Folder to write into.")
    ],
    job: JobFilter = None,
    where: WhereFilter = None,
) -> None:
    """Write every point of the selected jobs (all by default) as a Parquet dataset
    partitioned by job: DIR/job=NAME/curves.parquet with arm, metric, step, value and the
    job's metadata columns; a job exported again replaces its file.

    Example: tracker export points/ --where gpu=A10G
    """
    from tracker import api

    written = api.export(state(ctx).url, directory, job=job, where=where_pairs(where))
    for name, curves, points, path in written.iter_rows():
        typer.echo(f"{name}: {curves} curves, {points} points -> {path}")
    points = written["points"].sum()
    typer.echo(f"{written.height} jobs, {points} points written to {directory} (Parquet)")

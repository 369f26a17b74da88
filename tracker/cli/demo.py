"""``tracker demo``: sample jobs written, ingested and reported, to try the tracker on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracker.cli.base import app
from tracker.cli.base import state as _state


@app.command()
def demo(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Option("--dir", help="Where to write the sample job directories.")
    ] = Path("demo-jobs"),
    steps: Annotated[int, typer.Option(min=10, help="Training steps per sample arm.")] = 2000,
    out: Annotated[Path, typer.Option("--out", help="Where to write the report.")] = Path("report"),
    study: Annotated[
        str, typer.Option(metavar="NAME", help="Whose sample jobs (see `tracker studies`).")
    ] = "flashoptim",
) -> None:
    """Generate sample jobs, ingest them (replacing an earlier demo's), write the report.

    Example: tracker demo --steps 5000
    """
    from tracker import api

    directories = api.demo_jobs(directory, steps=steps, study=study)
    engine = _state(ctx).engine(may_create_file=True)
    typer.echo(f"wrote {len(directories)} sample jobs under {directory}/")
    done = api.demo(
        engine,
        directories,
        out=out,
        on_job=lambda result: typer.echo(result.outcome_line()),
        study=study,
    )
    typer.echo(f"database: {_state(ctx).url}")
    counts = ", ".join(f"{n} {status}" for status, n in done.statuses)
    typer.echo(f"claims: {counts} (see `tracker claims`)")
    typer.echo(f"report: {done.index.resolve()}")

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
) -> None:
    """Generate sample jobs, ingest them (replacing an earlier demo's), write the report.

    Example: tracker demo --steps 5000
    """
    from sqlalchemy.orm import Session

    from tracker.analysis.expectations import load_expectations
    from tracker.jobdir.sample import write_demo_jobs, write_demo_seed_jobs
    from tracker.queries.claims import claims as judge
    from tracker.queries.selection import Selection
    from tracker.report import write_report
    from tracker.services.ingest import ingest_demo_jobs

    engine = _state(ctx).engine(may_create_file=True)
    directories = write_demo_jobs(directory, steps=steps)
    directories += write_demo_seed_jobs(directory, steps=steps)
    typer.echo(f"wrote {len(directories)} sample jobs under {directory}/")
    ingest_demo_jobs(engine, directories, lambda result: typer.echo(result.outcome_line()))
    typer.echo(f"database: {_state(ctx).url}")
    exp = load_expectations()
    with Session(engine) as session:
        statuses = judge(session, Selection(), exp)["status"].value_counts(sort=True)
        index = write_report(session, out, exp)
    counts = ", ".join(f"{n} {status}" for status, n in statuses.iter_rows())
    typer.echo(f"claims: {counts} (see `tracker claims`)")
    typer.echo(f"report: {index.resolve()}")

"""The outputs for people: the offline HTML report and the live read-only server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracker.cli.base import (
    ExpectationsOption,
    JobFilter,
    SinceOption,
    StudyFilter,
    WhereFilter,
    app,
    job_selection,
    state,
)
from tracker.errors import Interrupted, raised_by_interrupt


@app.command()
def report(
    ctx: typer.Context,
    job: JobFilter = None,
    where: WhereFilter = None,
    since: SinceOption = None,
    study: StudyFilter = None,
    out: Annotated[Path, typer.Option("--out", help="Directory to write.")] = Path("report"),
    expectations: ExpectationsOption = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Render every job's pages, even those up to date; write into a folder that "
            "holds files but no report.",
        ),
    ] = False,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Remove the pages of every job not in this report, not only of "
            "jobs deleted from the database.",
        ),
    ] = False,
) -> None:
    """Write the offline HTML report; into an earlier one, render only what changed.

    The pages of jobs not selected stay (links to them keep working) unless the jobs were
    deleted from the database, or --prune.

    Ctrl-C (or SIGTERM) stops it with one line saying what was left as it was, exit code 130.

    Example: tracker report --where gpu=A10G --since 2026-10-01 --out report/
    """
    from tracker import api

    selection = job_selection(job, where=where, since=since, study=study)
    try:
        written = api.report(
            state(ctx).url, out, selection, expectations=expectations, force=force, prune=prune
        )
    except BaseException as exc:  # each file is written whole (or not), the index and manifest last
        if not raised_by_interrupt(exc):
            raise
        raise Interrupted(
            f"{out / 'index.html'} and its manifest not updated; job pages written so far are "
            "kept and rendered again by the next run"
        ) from None
    typer.echo(written.outcome_line())


SERVE_TOKEN_ENV = "TRACKER_SERVE_TOKEN"


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            envvar=SERVE_TOKEN_ENV,
            help=f"Require this token (env {SERVE_TOKEN_ENV}); needed off loopback.",
            show_default=False,
        ),
    ] = None,
    study: StudyFilter = None,
    header_timeout: Annotated[
        float,
        typer.Option(min=0.001, help="Seconds a client has to send a request's head."),
    ] = 10.0,
    max_connections: Annotated[
        int, typer.Option(min=1, help="Connections held at once; one more is answered 503.")
    ] = 500,
) -> None:
    """Serve the tracker live and read-only in a browser, with its JSON API under /api/.

    With --study, the pages and tables across jobs hold only that study's jobs (each job's
    page still judged by its own study).

    Example: tracker serve --host 0.0.0.0 --port 8765 --token "$(cat ~/.tracker-token)"
    """
    from tracker import api

    # opened read-only (never created or migrated), the schema checked before listening
    api.serve(
        state(ctx).url,
        host=host,
        port=port,
        token=token,
        study=study,
        header_timeout_s=header_timeout,
        max_connections=max_connections,
    )

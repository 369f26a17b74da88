"""``tracker sync``: ingest the finished jobs under a prefix (a directory or a bucket URL)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tracker.cli.base import StorageOptions, StudyOption, app, parse_storage_options
from tracker.cli.base import parse_meta as _parse_meta
from tracker.cli.base import state as _state
from tracker.errors import TrackerError
from tracker.row_formats import shown


@app.command()
def sync(
    ctx: typer.Context,
    prefix: Annotated[
        str, typer.Argument(help="Directory or URL (s3://, gs://, hf://buckets/...) to search.")
    ],
    meta: Annotated[
        list[str] | None, typer.Option(help="Metadata KEY=VALUE of the jobs ingested.")
    ] = None,
    watch: Annotated[
        float | None,
        typer.Option(metavar="SECONDS", min=0.0, help="Sync again every SECONDS until Ctrl-C."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="Tell what a sync would do; store nothing.")
    ] = False,
    replace: Annotated[
        bool, typer.Option(help="Swap in the jobs whose files changed since they were ingested.")
    ] = False,
    storage_option: StorageOptions = None,
    study: StudyOption = None,
) -> None:
    """Ingest every finished job directory under PREFIX that is not in the database yet.

    A job is finished when mem_sweep.json is there and every arm CSV has its summary JSON;
    unfinished ones are waiting. Jobs whose listed files (names, sizes, ETags or times) are
    as ingested are skipped without downloading; changed ones are left alone unless
    --replace. Exits with code 1 when a job failed.

    Example: tracker sync hf://buckets/ORG/flashoptim-repro/ --watch 300
    """
    from tracker import api

    parsed_meta = _parse_meta(meta or [])
    storage_options = parse_storage_options(storage_option or [])
    checked_study = None if study is None else api.check_study(study)
    report = api.sync(  # Ctrl-C: one line naming the jobs stored and not
        _state(ctx).engine(may_create_file=not dry_run),
        prefix,
        meta=parsed_meta,
        replace=replace,
        dry_run=dry_run,
        storage_options=storage_options,
        on_job=_tell,
        study=checked_study,
        watch=watch,
        on_round=_tell_round,
    )
    if report.failed:
        raise typer.Exit(1)


def _tell(job: Any) -> None:
    """Each job that is not simply unchanged, on a line of its own as it is done."""
    from tracker import api

    if job.status == api.SyncStatus.FAILED:
        typer.echo(f"Error: {shown(job.detail)}", err=True)
    elif job.status != api.SyncStatus.UNCHANGED or job.detail:
        typer.echo(shown(job.line()))


def _tell_round(outcome: Any) -> None:
    """Each pass's closing line; under --watch, a pass's error (the watch goes on)."""
    if isinstance(outcome, TrackerError):
        typer.echo(f"Error: {shown(str(outcome))}", err=True)
    else:
        typer.echo(shown(outcome.outcome_line()))

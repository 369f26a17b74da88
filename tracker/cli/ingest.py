"""``tracker ingest``: store finished job directories, with a progress bar for large ones."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import Annotated, Any

import typer

from tracker.api import MAX_FILE_SIZE, size_text
from tracker.cli.base import (
    StorageOptions,
    StudyOption,
    app,
    parse_storage_options,
)
from tracker.cli.base import parse_meta as _parse_meta
from tracker.cli.base import parse_size as _parse_size
from tracker.cli.base import state as _state
from tracker.domain import DEFAULT_ARM_MODEL
from tracker.row_formats import shown

PROGRESS_MIN_BYTES = 10_000_000


@app.command()
def ingest(
    ctx: typer.Context,
    directories: Annotated[
        list[str], typer.Argument(help="Job directories or URLs (s3://, gs://, hf://...).")
    ],
    job: Annotated[
        str | None, typer.Option(help="Job name (default: the directory's name).")
    ] = None,
    meta: Annotated[
        list[str] | None, typer.Option(help="Job metadata KEY=VALUE; repeatable.")
    ] = None,
    replace: Annotated[
        bool, typer.Option(help="Swap an existing job of the same name for this content.")
    ] = False,
    arm_model: Annotated[
        str, typer.Option(help="Model of arms whose summary JSON names none.")
    ] = DEFAULT_ARM_MODEL,
    strict_steps: Annotated[
        bool,
        typer.Option(
            help="Refuse a resumed run (a step lower than the one before), a step logged "
            "twice and an incomplete last line, instead of settling them with a warning."
        ),
    ] = False,
    storage_option: StorageOptions = None,
    max_file_size: Annotated[
        str,
        typer.Option(
            metavar="SIZE",
            help="Refuse a job file larger than this (e.g. 500MiB), by its size alone.",
        ),
    ] = size_text(MAX_FILE_SIZE),
    study: StudyOption = None,
) -> None:
    """Store finished job directories in the database, one transaction per job.

    A directory that fails is reported, naming it, and the others are still stored; the
    command then exits with code 1.

    A resumed run, a step logged twice or a cut-off last line is settled, with a warning.
    A directory may be an fsspec URL (s3://BUCKET/job2, gs://..., hf://buckets/ORG/B/job2).
    Each job is read and checked whole before its write transaction starts. Ctrl-C (or
    SIGTERM) stops it with one line naming the jobs stored and those not, exit code 130.

    Example: tracker ingest downloads/job2 --meta gpu=A10G --meta flashoptim=0.1.4
    """
    from tracker import api

    if job is not None and len(directories) > 1:
        raise typer.BadParameter("--job names one job; give one directory", param_hint="--job")
    storage_options = parse_storage_options(storage_option or [])
    size_limit = _parse_size(max_file_size, "--max-file-size")
    options = api.IngestOptions(
        job,
        _parse_meta(meta or []),
        replace,
        arm_model,
        strict_steps,
        storage_options,
        size_limit,
        None if study is None else api.check_study(study),
    )
    with ExitStack() as stack:
        with api.nothing_stored_yet(directories, job):
            engine = stack.enter_context(_state(ctx).storing_engine())
        progress = _ingest_progress(stack, many=len(directories) > 1)
        report = api.ingest_directories(engine, directories, options, progress)
    closing = report.outcome_line()
    if closing is not None:
        typer.echo(closing)
    if report.failed:
        raise typer.Exit(1)


def _ingest_progress(stack: ExitStack, *, many: bool) -> Any:
    """What ``tracker ingest`` draws as it goes: a progress bar on stderr (several
    directories, or much to read), and each directory's outcome on a line of its own."""
    from tracker import api

    class Progress(api.IngestProgress):
        bar: Any = None
        clear_bar = ""

        def started(self, total_bytes: int) -> None:
            # drawn on a terminal only: into a CI log a bar is a bare "ingesting" line
            if sys.stderr.isatty() and (many or total_bytes >= PROGRESS_MIN_BYTES):
                self.bar = stack.enter_context(
                    typer.progressbar(length=total_bytes, label="ingesting", file=sys.stderr)
                )
                self.clear_bar = "\r\033[K"

        def say(self, line: str, err: bool = False) -> None:
            """A line of its own, not glued to the end of the drawn progress bar."""
            sys.stderr.write(self.clear_bar)
            typer.echo(shown(line), err=err)

        def arm_written(self, nbytes: int) -> None:
            api.raise_lost_interrupt()  # within the job's transaction: it is not stored
            if self.bar is not None:
                self.bar.update(nbytes)

        def job_done(self, result: Any) -> None:
            self.say(result.outcome_line())
            if result.skipped:
                self.say(f"  skipped: {', '.join(result.skipped)}")
            for warning in result.warnings:
                self.say(f"  warning: {warning}")

        def job_failed(self, message: str) -> None:
            self.say(f"Error: {message}", err=True)

        def advanced(self, done_bytes: int) -> None:
            api.raise_lost_interrupt()
            if self.bar is not None:  # failed and unchanged directories count as done too
                self.bar.update(max(done_bytes - self.bar.pos, 0))

    return Progress()

"""``tracker ingest``: store finished job directories, with a progress bar for large ones."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from tracker.cli.base import app
from tracker.cli.base import parse_meta as _parse_meta
from tracker.cli.base import state as _state
from tracker.errors import TrackerError

PROGRESS_MIN_BYTES = 10_000_000


@app.command()
def ingest(
    ctx: typer.Context,
    directories: Annotated[list[Path], typer.Argument(help="Job directories to ingest.")],
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
    ] = "gpt-124m",
) -> None:
    """Store finished job directories in the database, one transaction per job.

    A directory that fails is reported, naming it, and the others are still stored; the
    command then exits with code 1.

    Example: tracker ingest downloads/job2 --meta gpu=A10G --meta flashoptim=0.1.4
    """
    from collections import Counter

    from tracker.jobdir.reader import curve_bytes
    from tracker.store.db import in_write_transaction
    from tracker.store.ingest import ingest_job

    if job is not None and len(directories) > 1:
        raise typer.BadParameter("--job names one job; give one directory", param_hint="--job")
    job_meta = _parse_meta(meta or [])
    engine = _state(ctx).engine(may_create_file=True)
    sizes = [curve_bytes(directory) for directory in directories]
    outcomes: Counter[str] = Counter()
    failed: list[str] = []
    with ExitStack() as stack:
        bar = None
        if len(directories) > 1 or sum(sizes) >= PROGRESS_MIN_BYTES:
            bar = stack.enter_context(
                typer.progressbar(length=sum(sizes), label="ingesting", file=sys.stderr)
            )
        on_arm = None if bar is None else lambda arm: bar.update(arm.csv_path.stat().st_size)
        clear_bar = "\r\033[K" if bar is not None and sys.stderr.isatty() else ""

        def say(line: str, err: bool = False) -> None:
            """A line of its own, not glued to the end of the drawn progress bar."""
            sys.stderr.write(clear_bar)
            typer.echo(line, err=err)

        done = 0
        for directory, size in zip(directories, sizes, strict=True):
            try:
                result = in_write_transaction(
                    engine,
                    partial(
                        ingest_job,
                        directory=directory,
                        name=job,
                        meta=job_meta,
                        replace=replace,
                        arm_model=arm_model,
                        on_arm=on_arm,
                    ),
                )
            except TrackerError as exc:
                message = str(exc)  # errors about the directory itself already name it
                if not message.startswith(f"{directory}: "):
                    message = f"{directory}: {message}"
                say(f"Error: {message}", err=True)
                failed.append(str(directory))
            else:
                say(result.summary())
                if result.skipped:
                    say(f"  skipped: {', '.join(result.skipped)}")
                outcomes[result.status] += 1
            done += size
            if bar is not None:  # failed and unchanged directories count as done too
                bar.update(max(done - bar.pos, 0))
    if len(directories) > 1:
        counts = [f"{n} {status}" for status, n in outcomes.items()]
        if failed:
            counts.append(f"{len(failed)} failed ({', '.join(failed)})")
        typer.echo(f"{len(directories)} directories: {', '.join(counts)}")
    if failed:
        raise typer.Exit(1)

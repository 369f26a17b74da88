"""The commands on stored jobs: list them, show one, edit its metadata, delete it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from tracker.cli.base import FormatOption, app, parse_meta, state
from tracker.cli.output import print_rows, print_tables
from tracker.output import Format


@app.command()
def jobs(ctx: typer.Context, fmt: FormatOption = Format.table) -> None:
    """List ingested jobs with their probe, arm and point counts and metadata (JSON: an
    object by key; a table and CSV: KEY=VALUE pairs).

    Example: tracker jobs --format csv
    """
    from tracker import access
    from tracker.store.catalog import meta_text

    rows = access.job_rows(state(ctx).url)
    if fmt is not Format.json:
        rows = [{**row, "meta": meta_text(row["meta"])} for row in rows]
    print_rows(rows, fmt)


class ShowPart(StrEnum):
    probes = "probes"
    arms = "arms"


@app.command()
def show(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="Job name.")],
    part: Annotated[
        ShowPart | None,
        typer.Option("--part", help="Only this table (CSV holds one table: required there)."),
    ] = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Show one job's probes and training arms.

    Example: tracker show job2 --part arms --format csv
    """
    from tracker import access

    if fmt is Format.csv and part is None:
        raise typer.BadParameter(
            "CSV holds one table: add --part probes or --part arms", param_hint="--part"
        )
    parts = list(ShowPart) if part is None else [part]
    print_tables(job, access.show(state(ctx).url, job, parts), fmt)


@app.command("meta")
def meta_command(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="Job name.")],
    pairs: Annotated[
        list[str] | None,
        typer.Argument(metavar="[KEY=VALUE]...", help="Metadata to set (`time` is checked)."),
    ] = None,
    unset: Annotated[
        list[str] | None, typer.Option("--unset", metavar="KEY", help="Remove a key; repeatable.")
    ] = None,
) -> None:
    """Set or remove an ingested job's metadata, then print it (without changes: just print it).

    Example: tracker meta job4 gpu=A100 time=2026-10-15T09:00Z --unset flashoptim
    """
    from tracker import access

    values = parse_meta(pairs or [], param_hint="KEY=VALUE")
    removed = unset or []
    for key in removed:
        if key in values:
            raise typer.BadParameter(f"{key!r} is both set and unset", param_hint="--unset")
    if values or removed:
        stored = access.edit_meta(state(ctx).engine(), job, values, removed)
    else:
        stored = access.job_meta(state(ctx).url, job)
    pairs_text = " ".join(f"{key}={value}" for key, value in stored.items())
    typer.echo(f"{job}: {pairs_text or 'no metadata'}")


@app.command()
def delete(ctx: typer.Context, job: Annotated[str, typer.Argument(help="Job name.")]) -> None:
    """Delete a job and everything ingested with it.

    Example: tracker delete job2
    """
    from tracker import access

    access.delete(state(ctx).engine(), job)
    typer.echo(f"deleted {job}")

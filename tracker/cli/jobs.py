"""The commands on stored jobs: list them, show one, edit its metadata, delete it."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from tracker.cli.base import (
    FormatOption,
    SinceOption,
    WhereFilter,
    app,
    parse_meta,
    parse_since,
    state,
    where_pairs,
)
from tracker.cli.printing import print_rows, print_tables
from tracker.domain import JOB_SORT_KEYS
from tracker.row_formats import Format


def _sort_key(value: str | None) -> str | None:
    if value is not None and value.removeprefix("-") not in JOB_SORT_KEYS:
        known = ", ".join(JOB_SORT_KEYS)
        raise typer.BadParameter(f"no column {value.removeprefix('-')!r}; sort by one of: {known}")
    return value


@app.command()
def studies(ctx: typer.Context, fmt: FormatOption = Format.table) -> None:
    """List the studies, packaged and from --studies: name, title, paper, claims judged;
    then those only the database defines (a teammate's), all rows then saying their source.

    Without --db (or its env) and no tracker.db here, only the study files are listed.

    Example: tracker --db postgresql://tracker@db/results studies --format json
    """
    from tracker import api

    found = state(ctx)
    print_rows(api.studies(found.url, missing_ok=not found.named), fmt)


@app.command()
def jobs(
    ctx: typer.Context,
    where: WhereFilter = None,
    since: SinceOption = None,
    sort: Annotated[
        str | None,
        typer.Option(
            metavar="[-]COLUMN",
            callback=_sort_key,
            help="Sort by this column (-COLUMN: descending) instead of job order.",
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N jobs.")] = None,
    fmt: FormatOption = Format.table,
) -> None:
    """List ingested jobs with their probe, arm and point counts and metadata (JSON: an
    object by key; a table and CSV: KEY=VALUE pairs).

    Example: tracker jobs --where gpu=A10G --sort -time --limit 5
    """
    from tracker import api

    pairs, start = where_pairs(where), parse_since(since)
    rows = api.job_rows(state(ctx).url, where=pairs, since=start, sort=sort, limit=limit)
    if fmt is not Format.json:
        rows = [{**row, "meta": api.meta_text(row["meta"])} for row in rows]
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
    from tracker import api

    if fmt is Format.csv and part is None:
        raise typer.BadParameter(
            "CSV holds one table: add --part probes or --part arms", param_hint="--part"
        )
    parts = list(ShowPart) if part is None else [part]
    print_tables(job, api.show(state(ctx).url, job, parts), fmt)


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
    from tracker import api

    values = parse_meta(pairs or [], param_hint="KEY=VALUE")
    removed = unset or []
    for key in removed:
        if key in values:
            raise typer.BadParameter(f"{key!r} is both set and unset", param_hint="--unset")
    if values or removed:
        stored = api.edit_meta(state(ctx).engine(), job, values, removed)
    else:
        stored = api.job_meta(state(ctx).url, job)
    pairs_text = " ".join(f"{key}={value}" for key, value in stored.items())
    typer.echo(f"{job}: {pairs_text or 'no metadata'}")


@app.command()
def delete(
    ctx: typer.Context,
    jobs: Annotated[list[str] | None, typer.Argument(metavar="JOB", help="Job names.")] = None,
    where: WhereFilter = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete without asking (needed off a terminal).")
    ] = False,
) -> None:
    """Delete jobs, named or chosen by --where, and everything ingested with them, in one
    transaction; on a terminal it asks first.

    Example: tracker delete job2-rerun job3-rerun --yes
    """
    from sqlalchemy import make_url

    from tracker import api
    from tracker.errors import UnknownJob, known_names

    if bool(jobs) == bool(where):
        raise typer.BadParameter("name the jobs to delete, or choose them with --where")
    url = state(ctx).url
    listed = [row["job"] for row in api.job_rows(url, where=where_pairs(where))]
    for name in jobs or []:
        if name not in listed:
            raise UnknownJob(name=name, known=known_names(listed, near=name))
    names = list(dict.fromkeys(jobs or listed))
    if not yes:
        shown = make_url(url).render_as_string(hide_password=True)
        what = names[0] if len(names) == 1 else f"{len(names)} jobs ({', '.join(names)})"
        them = "it" if len(names) == 1 else "them"
        question = f"delete {what} and everything ingested with {them} from {shown}?"
        if not sys.stdin.isatty():
            raise typer.BadParameter(
                "deleting asks first on a terminal; give --yes to delete without asking",
                param_hint="--yes",
            )
        typer.echo(f"{question} [y/N] ", nl=False, err=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            typer.echo("nothing deleted", err=True)
            raise typer.Exit(1)
    api.delete(state(ctx).engine(), names)
    for name in names:
        typer.echo(f"deleted {name}")

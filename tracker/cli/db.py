"""``tracker db``: copy jobs between databases, migrate the schema, show its revision, check
the stored data."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tracker.cli.base import db_app
from tracker.cli.base import state as _state


@db_app.command("copy")
def db_copy(
    source: Annotated[str, typer.Argument(metavar="SRC_URL", help="Database to copy from.")],
    destination: Annotated[str, typer.Argument(metavar="DST_URL", help="Database to copy to.")],
    meta_as_source: Annotated[
        bool,
        typer.Option(
            "--meta-as-source",
            help="Of a job both hold, remove the metadata keys only the destination has "
            "(carries a `meta --unset` made in the source since an earlier copy).",
        ),
    ] = False,
) -> None:
    """Copy every job the destination lacks, with all its data, one transaction per job;
    of a job it holds, update the metadata edited since. A key only the destination has is
    kept and said (set there, or unset in the source since: it cannot tell which), unless
    --meta-as-source.

    Ctrl-C (or SIGTERM) stops it with one line naming the jobs the destination holds and
    those it does not, exit code 130.

    Example: tracker db copy sqlite:///tracker.db postgresql+psycopg://me@dbhost/tracker
    """
    from tracker import api

    def show(outcome: Any) -> None:
        if outcome.status == "conflict":
            typer.echo(f"Error: {outcome.outcome_line()}", err=True)
        else:
            typer.echo(outcome.outcome_line())

    outcomes = api.copy_jobs(source, destination, on_job=show, meta_as_source=meta_as_source)
    copied = sum(outcome.status == "copied" for outcome in outcomes)
    updated = sum(outcome.status == "updated" for outcome in outcomes)
    conflicts = [outcome.job for outcome in outcomes if outcome.status == "conflict"]
    done = f"{copied} jobs copied" + (f", {updated} with metadata updated" if updated else "")
    if conflicts:
        typer.echo(f"{done}, {len(conflicts)} not: {', '.join(conflicts)}")
        raise typer.Exit(1)
    typer.echo(done)


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context) -> None:
    """Migrate the database schema to this tracker's newest revision (SQLite: copy kept).

    Example: tracker --db sqlite:///study.db db upgrade
    """
    from tracker import api

    api.upgrade(_state(ctx).url, on_migrated=lambda done: typer.echo(done.outcome_line()))


@db_app.command("rederive")
def db_rederive(
    ctx: typer.Context,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild every job's derived rows, kept or not.")
    ] = False,
) -> None:
    """Refill the derived rows (verdicts, numbers, summary) of every job lacking them for the
    packaged expectations, one transaction per job (`db upgrade` runs it too).

    Example: tracker db rederive --force
    """
    from tracker import api

    engine = _state(ctx).engine(may_create_file=False)
    done = api.rederive(engine, on_job=lambda name: typer.echo(f"{name}: rederived"), force=force)
    typer.echo(done.outcome_line())


@db_app.command("check")
def db_check(
    ctx: typer.Context,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Rebuild damaged derived rows from the job's points."),
    ] = False,
) -> None:
    """Verify every stored curve chunk (checksum, point count, steps), every kept summary and,
    on SQLite, the file's pages (its integrity_check); print one line per damaged one and
    exit 1 if any is left damaged (derived rows are rebuilt with --repair).

    Example: tracker db check --repair
    """
    from tracker import api

    engine = _state(ctx).engine(may_create_file=False)
    checked = api.check(
        engine, repair=repair, on_rebuilt=lambda name: typer.echo(f"{name}: rebuilt")
    )
    for line in [line for _job, line in checked.damage] + checked.engine_damage:
        typer.echo(f"Error: {line}", err=True)
    typer.echo(checked.outcome_line())
    if not checked.clean:
        raise typer.Exit(1)


@db_app.command("current")
def db_current(ctx: typer.Context) -> None:
    """Print the database's schema revision and this tracker's newest one.

    Example: tracker db current
    """
    from tracker import api

    revision = api.schema_revision(_state(ctx).url)
    state = "up to date" if revision == api.HEAD else "run `tracker db upgrade`"
    typer.echo(f"revision {revision or '(empty database)'}, head {api.HEAD}: {state}")

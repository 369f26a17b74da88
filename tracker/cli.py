"""The ``tracker`` command line: parse, call one library function, print.

Expected errors (``TrackerError``) become one ``Error: ...`` line on stderr and exit code 1.
"""

from __future__ import annotations

import re
import sys
from contextlib import ExitStack
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from tracker.config import DATABASE_URL_ENV, database_url
from tracker.domain import DEFAULT_ARM_MODEL, LOSS
from tracker.errors import TrackerError
from tracker.output import Format, render

META_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,99}")
PROGRESS_MIN_BYTES = 10_000_000


class ErrorReportingGroup(TyperGroup):
    """Turns expected errors into one line on stderr, without a traceback."""

    def invoke(self, ctx: Any) -> Any:
        from sqlalchemy.exc import DBAPIError

        from tracker.store.db import first_line

        try:
            return super().invoke(ctx)
        except TrackerError as exc:
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(1) from None
        except DBAPIError as exc:  # reads: a damaged file, a server gone away
            typer.echo(f"Error: database error: {first_line(exc)}", err=True)
            raise typer.Exit(1) from None


app = typer.Typer(
    cls=ErrorReportingGroup,
    no_args_is_help=True,
    add_completion=False,
    help="Results tracker for the FlashOptim reproduction study.",
)
db_app = typer.Typer(
    no_args_is_help=True, help="Inspect and migrate the tracker's database schema."
)
app.add_typer(db_app, name="db")

FormatOption = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]


class State:
    def __init__(self, url: str) -> None:
        self.url = url

    def engine(self, *, may_create_file: bool = False) -> Any:
        """Only the commands that store data (ingest, demo) may create a SQLite file."""
        from tracker.store.db import ON_LOCK_WAIT, open_database

        engine = open_database(self.url, may_create_file=may_create_file)
        return engine.execution_options(**{ON_LOCK_WAIT: partial(_tell_waiting, engine)})


def _tell_waiting(engine: Any) -> None:
    """A write that queues for the lock says why the command seems to hang."""
    url = engine.url.render_as_string(hide_password=True)
    typer.echo(f"waiting for another writer to finish with {url} ...", err=True)


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help=f"Database URL (env {DATABASE_URL_ENV}; default sqlite:///tracker.db).",
        ),
    ] = None,
) -> None:
    """Results tracker for the FlashOptim reproduction study.

    Example: tracker --db sqlite:///study.db jobs
    """
    ctx.obj = State(database_url(db))


def _state(ctx: typer.Context) -> State:
    state = ctx.find_object(State)
    assert state is not None
    return state


def _parse_meta(items: list[str], param_hint: str = "--meta") -> dict[str, str]:
    meta: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not META_KEY.fullmatch(key):
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=param_hint)
        if key in meta:
            raise typer.BadParameter(f"{key!r} is given twice", param_hint=param_hint)
        meta[key] = value
    return meta


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
    ] = DEFAULT_ARM_MODEL,
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


@app.command()
def jobs(ctx: typer.Context, fmt: FormatOption = Format.table) -> None:
    """List ingested jobs with their probe, arm and point counts.

    Example: tracker jobs --format csv
    """
    from sqlalchemy.orm import Session

    from tracker.store.catalog import list_jobs

    with Session(_state(ctx).engine()) as session:
        rows = list_jobs(session)
    typer.echo(render(rows, fmt))


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
    import json

    from sqlalchemy.orm import Session

    from tracker.store.catalog import job_arms, job_probes

    if fmt is Format.csv and part is None:
        raise typer.BadParameter(
            "CSV holds one table: add --part probes or --part arms", param_hint="--part"
        )
    readers = {ShowPart.probes: job_probes, ShowPart.arms: job_arms}
    parts = list(ShowPart) if part is None else [part]
    with Session(_state(ctx).engine()) as session:
        tables = {name: readers[name](session, job) for name in parts}
    if fmt is Format.json:
        document: dict[str, Any] = {
            "job": job,
            **{name: json.loads(render(rows, fmt)) for name, rows in tables.items()},
        }
        typer.echo(json.dumps(document, indent=2))
        return
    if fmt is Format.csv:
        typer.echo(render(tables[parts[0]], fmt))
        return
    typer.echo(
        "\n\n".join(f"{name} of {job}:\n{render(rows, fmt)}" for name, rows in tables.items())
    )


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
    from tracker.store.catalog import edit_job_meta, job_meta
    from tracker.store.db import in_write_transaction

    values = _parse_meta(pairs or [], param_hint="KEY=VALUE")
    removed = unset or []
    for key in removed:
        if key in values:
            raise typer.BadParameter(f"{key!r} is both set and unset", param_hint="--unset")
    if values or removed:
        edit = partial(edit_job_meta, name=job, meta=values, unset=removed)
        stored = in_write_transaction(_state(ctx).engine(), edit)
    else:
        stored = _read(ctx, job_meta, job)
    pairs_text = " ".join(f"{key}={value}" for key, value in stored.items())
    typer.echo(f"{job}: {pairs_text or 'no metadata'}")


@app.command()
def delete(ctx: typer.Context, job: Annotated[str, typer.Argument(help="Job name.")]) -> None:
    """Delete a job and everything ingested with it.

    Example: tracker delete job2
    """
    from tracker.store.catalog import delete_job
    from tracker.store.db import in_write_transaction

    in_write_transaction(_state(ctx).engine(), partial(delete_job, name=job))
    typer.echo(f"deleted {job}")


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
    from tracker.jobdir.sample import DEMO_META, write_demo_jobs, write_demo_seed_jobs
    from tracker.queries.claims import claims as judge
    from tracker.queries.selection import Selection
    from tracker.report import write_report
    from tracker.store.db import in_write_transaction
    from tracker.store.ingest import ingest_demo_job

    engine = _state(ctx).engine(may_create_file=True)
    directories = write_demo_jobs(directory, steps=steps)
    directories += write_demo_seed_jobs(directory, steps=steps)
    typer.echo(f"wrote {len(directories)} sample jobs under {directory}/")
    for job_directory in directories:
        meta = DEMO_META[job_directory.name]
        ingest = partial(ingest_demo_job, directory=job_directory, meta=meta)
        typer.echo(in_write_transaction(engine, ingest).summary())
    typer.echo(f"database: {_state(ctx).url}")
    exp = load_expectations()
    with Session(engine) as session:
        statuses = judge(session, Selection(), exp)["status"].value_counts(sort=True)
        index = write_report(session, out, exp)
    counts = ", ".join(f"{n} {status}" for status, n in statuses.iter_rows())
    typer.echo(f"claims: {counts} (see `tracker claims`)")
    typer.echo(f"report: {index.resolve()}")


query_app = typer.Typer(
    no_args_is_help=True, help="Tables across all ingested jobs, for people and scripts."
)
app.add_typer(query_app, name="query")

JobFilter = Annotated[list[str] | None, typer.Option("--job", help="Only this job; repeatable.")]
ModelFilter = Annotated[
    list[str] | None, typer.Option("--model", help="Only this model; repeatable.")
]
VariantFilter = Annotated[
    list[str] | None, typer.Option("--variant", help="Only this variant; repeatable.")
]
WhereFilter = Annotated[
    list[str] | None,
    typer.Option("--where", metavar="KEY=VALUE", help="Only jobs with this metadata; repeatable."),
]
GroupBy = Annotated[
    list[str] | None,
    typer.Option(
        "--group-by",
        metavar="KEY",
        help="Add this metadata as a column; with runs --aggregate-seeds, pool the seeds of "
        "the jobs sharing its value. Repeatable.",
    ),
]


def _selection(
    job: list[str] | None,
    model: list[str] | None,
    variant: list[str] | None,
    where: list[str] | None,
    group_by: list[str] | None,
) -> Any:
    from tracker.queries.selection import Selection

    try:
        return Selection.from_filters(job, model, variant, where, group_by)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--where") from None


def _read(ctx: typer.Context, query: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one library query in a read session."""
    from sqlalchemy.orm import Session

    with Session(_state(ctx).engine()) as session:
        return query(session, *args, **kwargs)


def _print_frame(frame: Any, fmt: Format) -> None:
    typer.echo(render(frame.to_dicts(), fmt, frame.columns))


@query_app.command("probes")
def query_probes(
    ctx: typer.Context,
    job: JobFilter = None,
    model: ModelFilter = None,
    variant: VariantFilter = None,
    where: WhereFilter = None,
    group_by: GroupBy = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only failed probes.")] = False,
    fmt: FormatOption = Format.table,
) -> None:
    """Memory probes of every job: bytes/param, parameters, peak memory.

    Example: tracker query probes --model gpt-124m --variant flash --format csv
    """
    from tracker.queries.tables import probes

    selection = _selection(job, model, variant, where, group_by)
    _print_frame(_read(ctx, probes, selection, failed=failed), fmt)


@query_app.command("runs")
def query_runs(
    ctx: typer.Context,
    job: JobFilter = None,
    model: ModelFilter = None,
    variant: VariantFilter = None,
    where: WhereFilter = None,
    group_by: GroupBy = None,
    aggregate_seeds: Annotated[
        bool, typer.Option("--aggregate-seeds", help="Mean, std and count over seeds.")
    ] = False,
    fmt: FormatOption = Format.table,
) -> None:
    """Training arms of every job: losses, points, divergence.

    Example: tracker query runs --variant ref --aggregate-seeds --group-by flashoptim
    """
    from tracker.queries.tables import runs

    selection = _selection(job, model, variant, where, group_by)
    _print_frame(_read(ctx, runs, selection, aggregate_seeds=aggregate_seeds), fmt)


@query_app.command("curve")
def query_curve(
    ctx: typer.Context,
    arm: Annotated[list[str], typer.Option("--arm", help="Arm name, e.g. ref_s0; repeatable.")],
    job: JobFilter = None,
    metric: Annotated[str, typer.Option(help="Curve column.")] = LOSS,
    ema: Annotated[
        float | None,
        typer.Option(max=1.0, help="Add an EMA column with this alpha (0 < ALPHA <= 1)."),
    ] = None,
    every: Annotated[int, typer.Option(min=1, help="Keep every N-th point and the last.")] = 1,
    fmt: FormatOption = Format.table,
) -> None:
    """Points of one or more arms' curves.

    Example: tracker query curve --job job2 --arm ref_s0 --ema 0.02 --every 100 --format csv
    """
    from tracker.queries.tables import curve

    if ema is not None and ema <= 0:
        raise typer.BadParameter("must be greater than 0", param_hint="--ema")
    selection = _selection(job, None, None, None, None)
    frame = _read(ctx, curve, selection, tuple(arm), metric=metric, ema_alpha=ema, every=every)
    _print_frame(frame, fmt)


@query_app.command("trend")
def query_trend(
    ctx: typer.Context,
    metric: Annotated[str, typer.Option(help="A probe or run field, e.g. bpp_state, val_loss.")],
    job: JobFilter = None,
    model: ModelFilter = None,
    variant: VariantFilter = None,
    where: WhereFilter = None,
    group_by: GroupBy = None,
    fmt: FormatOption = Format.table,
) -> None:
    """One figure of merit across jobs, in job order, with the change from the previous job.

    Example: tracker query trend --metric bpp_state --model gpt-124m --variant flash
    """
    from tracker.queries.tables import trend

    selection = _selection(job, model, variant, where, group_by)
    _print_frame(_read(ctx, trend, selection, metric), fmt)


ExpectationsOption = Annotated[
    Path | None,
    typer.Option("--expectations", metavar="FILE", help="TOML replacing the packaged one."),
]


@app.command()
def compare(
    ctx: typer.Context,
    job_a: Annotated[str, typer.Argument(help="The earlier job.")],
    job_b: Annotated[str, typer.Argument(help="The later job.")],
    expectations: ExpectationsOption = None,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",  # a plain flag: no --no- twin to squeeze the help
            help="Exit with code 3 when a verdict or a bytes/param figure regressed.",
        ),
    ] = False,
    fmt: FormatOption = Format.table,
) -> None:
    """Every verdict of two jobs side by side, with deltas and regressions.

    Example: tracker compare job2 job5 --fail-on-regression
    """
    from tracker.analysis.expectations import load_expectations
    from tracker.queries.compare import compare_jobs

    comparison = _read(ctx, compare_jobs, job_a, job_b, load_expectations(expectations))
    _print_frame(comparison.table, fmt)
    if fmt is Format.table:
        typer.echo(f"\n{comparison.summary()}")
        for line in comparison.regressions:
            typer.echo(f"  {line}")
    if fail_on_regression and comparison.regressed:
        raise typer.Exit(3)


@app.command()
def claims(
    ctx: typer.Context,
    job: JobFilter = None,
    where: WhereFilter = None,
    group_by: Annotated[
        list[str] | None,
        typer.Option("--group-by", metavar="KEY", help="Judge each value's jobs apart."),
    ] = None,
    expectations: ExpectationsOption = None,
    fmt: FormatOption = Format.table,
) -> None:
    """The study's claims judged on all jobs together: reproduced, not, mixed or inconclusive.

    Example: tracker claims --group-by flashoptim --format json
    """
    from tracker.analysis.expectations import load_expectations
    from tracker.queries.claims import claims as judge

    selection = _selection(job, None, None, where, group_by)
    _print_frame(_read(ctx, judge, selection, load_expectations(expectations)), fmt)


@app.command()
def sql(
    ctx: typer.Context,
    statement: Annotated[str, typer.Argument(help="One read-only SQL statement.")],
    fmt: FormatOption = Format.table,
) -> None:
    """Run one read-only SQL statement against the database (writes are refused by it).

    Example: tracker sql "SELECT name, ingested_at FROM job ORDER BY ingested_at"
    """
    from tracker.store.readonly import run_readonly_sql

    _state(ctx).engine().dispose()  # the schema checks of every command, before reading
    result = run_readonly_sql(_state(ctx).url, statement)
    typer.echo(render(result.as_dicts(), fmt, result.columns))


@app.command()
def report(
    ctx: typer.Context,
    job: JobFilter = None,
    where: WhereFilter = None,
    since: Annotated[
        str | None,
        typer.Option(metavar="TIME", help="Only jobs whose time is at or after TIME (ISO 8601)."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Directory to write.")] = Path("report"),
    expectations: ExpectationsOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Render every job's pages, even those up to date.")
    ] = False,
) -> None:
    """Write the offline HTML report; into an earlier one, render only what changed.

    Example: tracker report --where gpu=A10G --since 2026-10-01 --out report/
    """
    from dataclasses import replace

    from tracker.analysis.expectations import load_expectations
    from tracker.report import generate_report
    from tracker.store.catalog import parse_time

    selection = _selection(job, None, None, where, None)
    if since is not None:
        try:
            selection = replace(selection, since=parse_time(since))
        except TrackerError as exc:
            raise typer.BadParameter(str(exc), param_hint="--since") from None
    exp = load_expectations(expectations)
    result = _read(ctx, generate_report, out, exp, selection, force=force)
    typer.echo(result.summary())


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
) -> None:
    """Serve the tracker live and read-only in a browser, with its JSON API under /api/.

    Example: tracker serve --host 0.0.0.0 --port 8765 --token "$(cat ~/.tracker-token)"
    """
    import uvicorn

    from tracker.server import create_app
    from tracker.server.security import check_host

    check_host(host, token)
    # opened read-only (never created or migrated), the schema checked before listening
    uvicorn.run(create_app(_state(ctx).url, token), host=host, port=port, log_level="info")


@db_app.command("copy")
def db_copy(
    source: Annotated[str, typer.Argument(metavar="SRC_URL", help="Database to copy from.")],
    destination: Annotated[str, typer.Argument(metavar="DST_URL", help="Database to copy to.")],
) -> None:
    """Copy every job the destination lacks, with all its data, one transaction per job.

    Example: tracker db copy sqlite:///tracker.db postgresql+psycopg://me@dbhost/tracker
    """
    from sqlalchemy.orm import Session

    from tracker.store.copy import copy_job, job_names
    from tracker.store.db import in_write_transaction, open_database

    source_engine = open_database(source, may_create_file=False)
    target = open_database(destination)
    copied = 0
    conflicts = []
    with Session(source_engine) as reader:
        for name in job_names(reader):
            outcome = in_write_transaction(target, partial(copy_job, reader, name=name))
            if outcome.status == "conflict":
                typer.echo(f"Error: {outcome.summary()}", err=True)
                conflicts.append(name)
                continue
            typer.echo(outcome.summary())
            copied += outcome.status == "copied"
    if conflicts:
        typer.echo(f"{copied} jobs copied, {len(conflicts)} not: {', '.join(conflicts)}")
        raise typer.Exit(1)
    typer.echo(f"{copied} jobs copied")


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context) -> None:
    """Migrate the database schema to this tracker's newest revision (SQLite: copy kept).

    Example: tracker --db sqlite:///study.db db upgrade
    """
    from tracker.store.db import create_tracker_engine, upgrade_database

    typer.echo(upgrade_database(create_tracker_engine(_state(ctx).url)).summary())


@db_app.command("current")
def db_current(ctx: typer.Context) -> None:
    """Print the database's schema revision and this tracker's newest one.

    Example: tracker db current
    """
    from tracker.store.db import HEAD, check_schema, create_tracker_engine, refuse_missing_file

    engine = create_tracker_engine(_state(ctx).url)
    refuse_missing_file(engine)
    revision = check_schema(engine, create=False)
    head = HEAD
    state = "up to date" if revision == head else "run `tracker db upgrade`"
    typer.echo(f"revision {revision or '(empty database)'}, head {head}: {state}")


def main() -> None:
    app()

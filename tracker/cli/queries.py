"""The read-only questions: ``tracker query ...`` tables, ``compare``, ``claims`` and ``sql``."""

from __future__ import annotations

from typing import Annotated

import typer

from tracker.cli.base import (
    ExpectationsOption,
    FormatOption,
    GroupBy,
    JobFilter,
    ModelFilter,
    VariantFilter,
    WhereFilter,
    app,
    query_app,
    state,
    where_pairs,
)
from tracker.cli.output import print_frame, print_rows
from tracker.domain import LOSS
from tracker.output import Format


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
    from tracker import api

    pairs = where_pairs(where)
    frame = api.probes(
        state(ctx).url,
        job=job,
        model=model,
        variant=variant,
        where=pairs,
        group_by=group_by,
        failed=failed,
    )
    print_frame(frame, fmt)


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
    from tracker import api

    pairs = where_pairs(where)
    frame = api.runs(
        state(ctx).url,
        job=job,
        model=model,
        variant=variant,
        where=pairs,
        group_by=group_by,
        aggregate_seeds=aggregate_seeds,
    )
    print_frame(frame, fmt)


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
    from tracker import api

    if ema is not None and ema <= 0:
        raise typer.BadParameter("must be greater than 0", param_hint="--ema")
    frame = api.curve(state(ctx).url, arm, job=job, metric=metric, ema=ema, every=every)
    print_frame(frame, fmt)


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
    from tracker import api

    pairs = where_pairs(where)
    frame = api.trend(
        state(ctx).url,
        metric,
        job=job,
        model=model,
        variant=variant,
        where=pairs,
        group_by=group_by,
    )
    print_frame(frame, fmt)


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
    from tracker import api

    comparison = api.comparison(state(ctx).url, job_a, job_b, expectations=expectations)
    print_frame(comparison.table, fmt)
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
    from tracker import api

    pairs = where_pairs(where)
    frame = api.claims(
        state(ctx).url, job=job, where=pairs, group_by=group_by, expectations=expectations
    )
    print_frame(frame, fmt)


@app.command()
def sql(
    ctx: typer.Context,
    statement: Annotated[str, typer.Argument(help="One read-only SQL statement.")],
    timeout: Annotated[
        float,
        typer.Option(
            min=0.001,
            metavar="SECONDS",
            help="Stop the statement after this long, on SQLite as on PostgreSQL.",
        ),
    ] = 60.0,  # readonly.STATEMENT_TIMEOUT_S, not imported here: sql starts without SQLAlchemy
    fmt: FormatOption = Format.table,
) -> None:
    """Run one read-only SQL statement against the database (writes are refused by it).

    Example: tracker sql --timeout 10 "SELECT name, ingested_at FROM job ORDER BY ingested_at"
    """
    from tracker import access

    # the schema checked before reading
    result = access.sql_result(state(ctx).url, statement, timeout)
    print_rows(result.as_dicts(), fmt, result.columns)

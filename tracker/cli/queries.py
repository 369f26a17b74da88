"""The read-only questions: ``tracker query ...`` tables, ``compare``, ``claims`` and ``sql``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tracker.cli.base import (
    ExpectationsOption,
    FormatOption,
    GroupBy,
    JobFilter,
    ModelFilter,
    SinceOption,
    VariantFilter,
    WhereFilter,
    app,
    parse_since,
    query_app,
    state,
    where_pairs,
)
from tracker.cli.printing import print_frame, print_rows
from tracker.domain import LOSS, ClaimStatus
from tracker.row_formats import Format


def _print_table(ctx: typer.Context, table: str, fmt: Format, **options: Any) -> None:
    """One of ``tracker.api``'s tables (``probes``, ``runs``, ``trend``), printed."""
    from tracker import api

    options["where"] = where_pairs(options["where"])
    print_frame(getattr(api, table)(state(ctx).url, **options), fmt)


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
    filters = dict(job=job, model=model, variant=variant, where=where, group_by=group_by)
    _print_table(ctx, "probes", fmt, failed=failed, **filters)


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
    filters = dict(job=job, model=model, variant=variant, where=where, group_by=group_by)
    _print_table(ctx, "runs", fmt, aggregate_seeds=aggregate_seeds, **filters)


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
    filters = dict(job=job, model=model, variant=variant, where=where, group_by=group_by)
    _print_table(ctx, "trend", fmt, metric=metric, **filters)


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
        typer.echo(f"\n{comparison.outcome_line()}")
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
    since: SinceOption = None,
    status: Annotated[
        list[str] | None,
        typer.Option(metavar="STATUS[,STATUS]", help="Only claims of these statuses."),
    ] = None,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            metavar="STATUS[,STATUS]",
            help="Exit with code 3 when any claim judged has one of these statuses.",
        ),
    ] = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column in the table (CSV and JSON have them).")
    ] = False,
    expectations: ExpectationsOption = None,
    fmt: FormatOption = Format.table,
) -> None:
    """The study's claims judged on all jobs together: reproduced, not, mixed or inconclusive.

    The table shows each claim's status, subject, estimate with its interval and the number
    of jobs; --wide, CSV and JSON add the statement, the expected value and the detail.

    Example: tracker claims --since 2026-10-01 --fail-on NOT_REPRODUCED,MIXED
    """
    from tracker import api

    pairs = where_pairs(where)
    shown, gate = _claim_statuses(status, "--status"), _claim_statuses(fail_on, "--fail-on")
    judged = api.claims(
        state(ctx).url,
        job=job,
        where=pairs,
        group_by=group_by,
        since=parse_since(since),
        expectations=expectations,
    )
    frame = judged.filter(judged["status"].is_in(shown)) if shown else judged
    if fmt is Format.table and not wide:
        print_rows(*_compact_claims(frame.to_dicts(), group="group" in frame.columns))
    else:
        print_frame(frame, fmt)
    failing = [s for s in gate if s in judged["status"]]
    if failing:
        tally = judged["status"].value_counts()
        counted = dict(zip(tally["status"], tally["count"], strict=True))
        found = ", ".join(f"{counted[s]} {s}" for s in failing)
        typer.echo(f"claims failing --fail-on: {found}", err=True)
        raise typer.Exit(3)


def _claim_statuses(items: list[str] | None, hint: str) -> list[str]:
    """``--status``/``--fail-on`` values, comma-separated or repeated, checked."""
    names = [part.strip().upper() for item in items or [] for part in item.split(",")]
    for name in names:
        if name not in set(ClaimStatus):
            known = ", ".join(ClaimStatus)
            raise typer.BadParameter(f"no claim status {name!r}; known: {known}", param_hint=hint)
    return names


def _compact_claims(rows: list[dict], *, group: bool) -> tuple[list[dict], Format, list[str]]:
    """The claims table a terminal shows: status, claim, subject, estimate with its
    interval, jobs (and the group, with --group-by)."""

    def number(value: float | None) -> str:
        return "-" if value is None else "NaN" if value != value else f"{value:.4g}"

    def estimate(row: dict) -> str:
        if row["ci_low"] is None or not row["interval"]:
            return number(row["estimate"])
        interval = f"{row['interval']} {number(row['ci_low'])}..{number(row['ci_high'])}"
        return f"{number(row['estimate'])} ({interval})"

    columns = [*(["group"] if group else []), "status", "claim", "subject", "estimate", "jobs"]
    compact = [{**row, "estimate": estimate(row), "jobs": row["n_jobs"]} for row in rows]
    return compact, Format.table, columns


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

"""The read-only questions: ``tracker query ...`` tables, ``compare``, ``claims`` and ``sql``."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Annotated

import typer

from tracker.cli.base import (
    ExpectationsOption,
    FormatOption,
    GroupBy,
    JobFilter,
    ModelFilter,
    SinceOption,
    StudyFilter,
    VariantFilter,
    WhereFilter,
    app,
    job_selection,
    query_app,
    state,
    where_pairs,
)
from tracker.cli.printing import echo_fitted, print_fitted, print_frame
from tracker.config import MAX_BYTES, MAX_ROWS, STATEMENT_TIMEOUT_S
from tracker.domain import LOSS, MIN_WINDOW_POINTS, ClaimStatus, RunLengths
from tracker.row_formats import Format, render

if TYPE_CHECKING:
    import polars as pl

# A comparison within the terminal: names wrap; the numbers and the rule follow their row
COMPARE_WRAPPED = ("check", "subject", "rule")
COMPARE_SPILL = (("rule",), ("expected", "tolerance"), ("measured_a", "measured_b"))


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

    selection = job_selection(job, model, variant, where, group_by)
    print_frame(api.probes(state(ctx).url, selection, failed=failed), fmt)


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
    sort: Annotated[
        str | None,
        typer.Option(metavar="[-]COLUMN", help="Sort by this column; -COLUMN: descending."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N rows.")] = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Training arms of every job: losses, steps, divergence, notes.

    Example: tracker query runs --where 'val_loss<3.3' --sort val_loss --limit 5
    """
    from tracker import api

    selection = job_selection(job, model, variant, where, group_by)
    table = api.runs(
        state(ctx).url, selection, aggregate_seeds=aggregate_seeds, sort=sort, limit=limit
    )
    print_frame(table, fmt)


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
    start: Annotated[int | None, typer.Option(help="First step shown (default: first).")] = None,
    end: Annotated[int | None, typer.Option(help="Last step shown (default: last).")] = None,
    points: Annotated[
        int | None,
        typer.Option(
            min=MIN_WINDOW_POINTS, help="At most N points per curve (min/max downsampled)."
        ),
    ] = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Points of one or more arms' curves; --start/--end read only the chunks holding those
    steps, --points downsamples each curve as the curve explorer does.

    Example: tracker query curve --job job2 --arm ref_s0 --start 1000 --end 5000 --points 200
    """
    from tracker import api

    if ema is not None and ema <= 0:
        raise typer.BadParameter("must be greater than 0", param_hint="--ema")
    frame = api.curve(
        state(ctx).url,
        arm,
        job=job,
        metric=metric,
        ema=ema,
        every=every,
        start=start,
        end=end,
        points=points,
    )
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

    selection = job_selection(job, model, variant, where, group_by)
    print_frame(api.trend(state(ctx).url, metric, selection), fmt)


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
    changes_only: Annotated[
        bool, typer.Option("--changes-only", help="Only the rows that changed (no `same`).")
    ] = False,
    baseline_where: Annotated[
        list[str] | None,
        typer.Option(
            "--baseline-where",
            metavar="KEY=VALUE",
            help="Judge against the jobs with this metadata (default: the same configuration).",
        ),
    ] = None,
    study: StudyFilter = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Every verdict of two jobs side by side, with deltas and regressions first.

    Each change is judged against the comparable jobs (neither compared one; the same values
    of the configuration keys, see docs/claims.md) and the check's tolerance. With --study,
    both jobs must be of that study.

    Example: tracker compare job2 job5 --fail-on-regression --changes-only
    """
    from tracker import api

    where = None if baseline_where is None else where_pairs(baseline_where, "--baseline-where")
    if where is not None and any(condition.op != "=" for condition in where):
        raise typer.BadParameter("takes KEY=VALUE only", param_hint="--baseline-where")
    comparison = api.comparison(
        state(ctx).url, job_a, job_b, expectations=expectations, baseline_where=where, study=study
    )
    shown = comparison.changes_only() if changes_only else comparison
    if fmt is Format.table:
        table = shown.table
        print_fitted(table.to_dicts(), table.columns, wrapped=COMPARE_WRAPPED, spill=COMPARE_SPILL)
        regressions = [f"  {line}" for line in comparison.regressions]
        regressions += [f"  within noise: {line}" for line in comparison.within_noise]
        echo_fitted(["", comparison.outcome_line(), *regressions])
    else:
        print_frame(shown.table, fmt)
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
        typer.Option(
            metavar="STATUS[,STATUS]",
            help="Only claims of these statuses (KNOWN: not reproduced by a setup difference).",
        ),
    ] = None,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            metavar="STATUS[,STATUS]",
            help="Exit with code 3 when any claim judged has one of these statuses "
            "(NOT_REPRODUCED leaves out the KNOWN ones: name KNOWN to fail on them too).",
        ),
    ] = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column in the table (CSV and JSON have them).")
    ] = False,
    lengths: Annotated[
        RunLengths | None,
        typer.Option(
            help="Compare runs of one length (matched, a row per length) or each variant at "
            "its own full length (own); default: as each claim's study file says."
        ),
    ] = None,
    expectations: ExpectationsOption = None,
    study: StudyFilter = None,
    fmt: FormatOption = Format.table,
) -> None:
    """The study's claims judged on all jobs together: reproduced, not, mixed or inconclusive.

    The table starts with the count of each status and shows each claim's status (KNOWN:
    not reproduced in every job by a known setup difference), subject (with the runs' length
    where the claim depends on it), estimate with its interval and the number of jobs;
    --wide, CSV and JSON add the statement, the expected value and the detail. Each
    study's jobs are judged apart, by its own expectations (a group per study).

    Example: tracker claims --since 2026-10-01 --fail-on NOT_REPRODUCED,MIXED
    """
    import polars as pl

    from tracker import api

    selection = job_selection(job, where=where, group_by=group_by, since=since, study=study)
    shown, gate = _claim_statuses(status, "--status"), _claim_statuses(fail_on, "--fail-on")
    judged = api.claims(state(ctx).url, selection, expectations=expectations, lengths=lengths)
    frame = judged.filter(pl.any_horizontal(_having(s) for s in shown)) if shown else judged
    if fmt is Format.table and not wide:
        shown_rows = frame.to_dicts()
        echo_fitted([_claim_counts(shown_rows)])
        compact = _compact_claims(shown_rows, group="group" in frame.columns)
        print_fitted(*compact, wrapped=("group", "claim", "subject", "estimate"))
        echo_fitted(
            [
                f"to decide {row['claim']} ({row['subject']}): {row['next_runs']}"
                for row in shown_rows
                if row.get("next_runs")
            ]
        )
    else:
        print_frame(frame, fmt)
    failing = {name: judged.filter(_having(name)).height for name in gate}
    found = ", ".join(f"{n} {name}" for name, n in failing.items() if n)
    if found:
        typer.echo(f"claims failing --fail-on: {found}", err=True)
        raise typer.Exit(3)


KNOWN = "KNOWN"  # a NOT_REPRODUCED claim whose every job differs from the paper by design
# the run length a statement names: "(runs of 2,000 steps; the paper's number is for 20,000)"
RUN_LENGTH = re.compile(r"runs of ([\d,]+) steps(?:; the paper's number is for ([\d,]+))?")


def _having(name: str) -> pl.Expr:
    """The claims a --status/--fail-on name picks: KNOWN the claims every job of which is a
    known setup difference; NOT_REPRODUCED the others not reproduced (asked for apart)."""
    import polars as pl

    if name == KNOWN:
        return pl.col("known").fill_null(False)
    picked = pl.col("status") == name
    return picked & ~pl.col("known").fill_null(False) if name == "NOT_REPRODUCED" else picked


def _claim_statuses(items: list[str] | None, hint: str) -> list[str]:
    """``--status``/``--fail-on`` values, comma-separated or repeated, checked."""
    names = [part.strip().upper() for item in items or [] for part in item.split(",")]
    for name in names:
        if name not in {*ClaimStatus, KNOWN}:
            known = ", ".join([*ClaimStatus, KNOWN])
            raise typer.BadParameter(f"no claim status {name!r}; known: {known}", param_hint=hint)
    return names


def _claim_counts(rows: list[dict]) -> str:
    """One line of how many claims have each status, KNOWN ones counted apart."""
    known = sum(bool(row.get("known")) for row in rows)
    tally = Counter(row["status"] for row in rows if not row.get("known"))
    counts = [f"{tally[s]} {s}" for s in ClaimStatus if tally[s]]
    counts += [f"{known} {KNOWN}"] if known else []
    return f"{len(rows)} claims: {', '.join(counts) or 'none'}"


def _compact_claims(rows: list[dict], *, group: bool) -> tuple[list[dict], list[str]]:
    """The claims table a terminal shows: status (KNOWN for a claim not reproduced by a known
    setup difference in every job), claim, subject with the
    runs' length where the claim names it, estimate with its interval, jobs (and the group,
    with --group-by)."""

    def number(value: float | None) -> str:
        return "-" if value is None else "NaN" if value != value else f"{value:.4g}"

    def estimate(row: dict) -> str:
        if row["ci_low"] is None or not row["interval"]:
            return number(row["estimate"])
        interval = f"{row['interval']} {number(row['ci_low'])}..{number(row['ci_high'])}"
        return f"{number(row['estimate'])} ({interval})"

    def subject(row: dict) -> str:
        length = RUN_LENGTH.search(row.get("statement") or "")
        if length is None:
            return str(row["subject"])
        paper = f"; paper {length[2]}" if length[2] else ""
        return f"{row['subject']} ({length[1]} steps{paper})"

    columns = [*(["group"] if group else []), "status", "claim", "subject", "estimate", "jobs"]
    compact = [
        {
            **row,
            "status": KNOWN if row.get("known") else row["status"],
            "subject": subject(row),
            "estimate": estimate(row),
            "jobs": row["n_jobs"],
        }
        for row in rows
    ]
    return compact, columns


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
    ] = STATEMENT_TIMEOUT_S,
    max_rows: Annotated[
        int, typer.Option(min=1, metavar="N", help="Refuse a result of more rows.")
    ] = MAX_ROWS,
    max_bytes: Annotated[
        int,
        typer.Option(min=1, metavar="BYTES", help="Refuse a result whose values take more."),
    ] = MAX_BYTES,
    fmt: FormatOption = Format.table,
) -> None:
    """Run one read-only SQL statement against the database (writes are refused by it).
    The time limit covers fetching and rendering the result too; a result past --max-rows
    or --max-bytes is refused with one line, never half printed.

    Example: tracker sql --timeout 10 "SELECT name, ingested_at FROM job ORDER BY ingested_at"
    """
    from tracker import api

    # the schema checked before reading
    limits = api.SqlLimits(timeout, max_rows, max_bytes)
    result = api.sql_result(state(ctx).url, statement, limits)
    text = render(result.as_dicts(), fmt, result.columns)
    result.check_time()
    typer.echo(text)

"""The tracker from Python, for notebooks: the CLI's queries as polars DataFrames.

    >>> from tracker import api
    >>> api.trend(None, "bpp_state", model="gpt-124m", variant="flash")   # default database
    >>> api.runs("postgresql+psycopg://team@db/tracker", aggregate_seeds=True)

Every function takes the database as its first argument: a URL, an ``Engine`` from
``api.connect``, or None for ``TRACKER_DATABASE_URL`` / ``sqlite:///tracker.db`` (which
``jobs``, ``probes`` and ``runs`` also take when it is left out). The ``tracker`` command
line is a shell over these functions: each command parses, calls one of them and prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import polars as pl

from tracker.access import (
    HEAD,
    Database,
    Row,
    connect,
    delete,
    edit_meta,
    job_meta,
    job_rows,
    schema_revision,
    show,
    sql_result,
    with_session,
)
from tracker.analysis.expectations import load_expectations
from tracker.domain import LOSS
from tracker.queries import claims as _claims
from tracker.queries import compare as _compare
from tracker.queries import tables
from tracker.queries.compare import Comparison
from tracker.queries.export import export_curves
from tracker.queries.selection import Selection
from tracker.report import Report, generate_report
from tracker.services.copy import copy_jobs
from tracker.store.readonly import STATEMENT_TIMEOUT_S

Where = Mapping[str, str] | Iterable[tuple[str, str]] | None  # pairs: a key may repeat

__all__ = [
    "HEAD",
    "Database",
    "Row",
    "Where",
    "claims",
    "compare",
    "comparison",
    "connect",
    "copy_jobs",
    "curve",
    "delete",
    "edit_meta",
    "export",
    "job_meta",
    "job_rows",
    "jobs",
    "probes",
    "report",
    "runs",
    "schema_revision",
    "show",
    "sql",
    "sql_result",
    "trend",
]


def _selection(
    job: Iterable[str] | str | None,
    model: Iterable[str] | str | None,
    variant: Iterable[str] | str | None,
    where: Where,
    group_by: Iterable[str] | str | None,
) -> Selection:
    def many(value: Iterable[str] | str | None) -> tuple[str, ...]:
        return (value,) if isinstance(value, str) else tuple(value or ())

    return Selection(many(job), many(model), many(variant), _pairs(where), many(group_by))


def _pairs(where: Where) -> tuple[tuple[str, str], ...]:
    return tuple(where.items()) if isinstance(where, Mapping) else tuple(where or ())


def jobs(db: Database = None) -> pl.DataFrame:
    """Every job with its counts and metadata, in job order. ``meta`` is a struct with a text
    field per key any job has (null where a job lacks it): ``frame["meta"].struct.field("gpu")``,
    or ``frame["meta"].struct.unnest()`` for a frame of one column per key (a struct, not
    columns, because a key such as ``time`` may be named as a column is)."""
    listed = job_rows(db)
    keys = sorted({key for row in listed for key in row["meta"]})
    meta = pl.Struct({key: pl.String for key in keys})
    rows = [{**row, "meta": {key: row["meta"].get(key) for key in keys}} for row in listed]
    return pl.DataFrame(rows, schema_overrides={"meta": meta} if rows else None)


def probes(
    db: Database = None,
    *,
    job: Iterable[str] | str | None = None,
    model: Iterable[str] | str | None = None,
    variant: Iterable[str] | str | None = None,
    where: Where = None,
    group_by: Iterable[str] | str | None = None,
    failed: bool = False,
) -> pl.DataFrame:
    """One row per (job, model, variant): bytes/param, parameters, peak memory."""
    selection = _selection(job, model, variant, where, group_by)
    return with_session(db, lambda s: tables.probes(s, selection, failed=failed))


def runs(
    db: Database = None,
    *,
    job: Iterable[str] | str | None = None,
    model: Iterable[str] | str | None = None,
    variant: Iterable[str] | str | None = None,
    where: Where = None,
    group_by: Iterable[str] | str | None = None,
    aggregate_seeds: bool = False,
) -> pl.DataFrame:
    """One row per arm per job, or per (job, model, variant) with seeds aggregated."""
    selection = _selection(job, model, variant, where, group_by)
    return with_session(db, lambda s: tables.runs(s, selection, aggregate_seeds=aggregate_seeds))


def trend(
    db: Database,
    metric: str,
    *,
    job: Iterable[str] | str | None = None,
    model: Iterable[str] | str | None = None,
    variant: Iterable[str] | str | None = None,
    where: Where = None,
    group_by: Iterable[str] | str | None = None,
) -> pl.DataFrame:
    """One probe or run field across jobs in job order, with the change from the previous job."""
    selection = _selection(job, model, variant, where, group_by)
    return with_session(db, lambda s: tables.trend(s, selection, metric))


def curve(
    db: Database,
    arm: Iterable[str] | str,
    *,
    job: Iterable[str] | str | None = None,
    metric: str = LOSS,
    ema: float | None = None,
    every: int = 1,
) -> pl.DataFrame:
    """The points of arms' curves (``ema`` adds a smoothed column)."""
    selection = _selection(job, None, None, None, None)
    arms = (arm,) if isinstance(arm, str) else tuple(arm)
    return with_session(
        db,
        lambda s: tables.curve(s, selection, arms, metric=metric, ema_alpha=ema, every=every),
    )


def export(
    db: Database,
    directory: Path | str,
    *,
    job: Iterable[str] | str | None = None,
    where: Where = None,
) -> pl.DataFrame:
    """Every point of the selected jobs as a Parquet dataset partitioned by job, which
    ``pl.scan_parquet(f"{directory}/**/*.parquet", hive_partitioning=True)`` or DuckDB read;
    one row per job written: ``job``, ``curves``, ``points``, ``path``."""
    selection = _selection(job, None, None, where, None)
    return with_session(db, lambda s: export_curves(s, selection, Path(directory)))


def comparison(
    db: Database,
    job_a: str,
    job_b: str,
    *,
    expectations: Path | None = None,
    baseline_where: Where = None,
) -> Comparison:
    """Two jobs compared: the table of ``compare``, its summary line and the regressions.
    The gate's yardstick is the jobs comparable to them (the same values of the
    expectations' ``[gate] configuration`` keys), or those with ``baseline_where``'s metadata."""
    exp = load_expectations(expectations)
    where = None if baseline_where is None else _pairs(baseline_where)
    return with_session(db, lambda s: _compare.compare_jobs(s, job_a, job_b, exp, where))


def compare(
    db: Database, job_a: str, job_b: str, *, expectations: Path | None = None
) -> pl.DataFrame:
    """Every verdict of two jobs side by side; the ``change`` column marks regressions."""
    return comparison(db, job_a, job_b, expectations=expectations).table


def claims(
    db: Database = None,
    *,
    job: Iterable[str] | str | None = None,
    where: Where = None,
    group_by: Iterable[str] | str | None = None,
    since: datetime | None = None,
    expectations: Path | None = None,
) -> pl.DataFrame:
    """The study's claims judged on all selected jobs together (only jobs whose ``time`` is
    at or after ``since``), one row per claim and subject (with ``group_by``, per group of
    jobs in a ``group`` column)."""
    exp = load_expectations(expectations)
    selection = replace(_selection(job, None, None, where, group_by), since=since)
    return with_session(db, lambda s: _claims.claims(s, selection, exp))


def sql(db: Database, statement: str, timeout_s: float = STATEMENT_TIMEOUT_S) -> pl.DataFrame:
    """One read-only SQL statement's result, stopped after ``timeout_s`` seconds."""
    result = sql_result(db, statement, timeout_s)
    return pl.DataFrame(result.rows, schema=result.columns, orient="row")


def report(
    db: Database,
    out: Path,
    *,
    job: Iterable[str] | str | None = None,
    where: Where = None,
    since: datetime | None = None,
    expectations: Path | None = None,
    force: bool = False,
    prune: bool = False,
) -> Report:
    """Write the offline HTML report of the selected jobs (only jobs whose ``time`` is at or
    after ``since``) under ``out``, rendering only what changed (everything with ``force``,
    which also writes into a folder holding no report); the pages of other jobs stay unless
    they were deleted from the database, or ``prune``."""
    selection = replace(_selection(job, None, None, where, None), since=since)
    exp = load_expectations(expectations)
    return with_session(
        db, lambda s: generate_report(s, out, exp, selection, force=force, prune=prune)
    )

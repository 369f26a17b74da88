"""The queries of ``tracker.api`` as polars DataFrames (``tracker query``, ``claims``,
``compare``, ``export``, ``sql``), the report and the server; import them from
``tracker.api``.

Which jobs and rows a query keeps is a ``JobSelection``; the functions also take its parts as
keywords (``job``, ``model``, ``variant``, ``where``, ``group_by``), as notebooks write them:

    >>> api.runs(db, variant="ref", aggregate_seeds=True, group_by="flashoptim")
    >>> api.runs(db, JobSelection(variants=("ref",), group_by=("flashoptim",)))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

import polars as pl
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis.expectations import (
    Expectations,
    load_expectations,
    study_expectations,
    study_names,
)
from tracker.api.rows import Database, SqlLimits, job_rows, sql_result, with_session
from tracker.conditions import Condition, as_conditions
from tracker.config import MAX_BYTES, MAX_ROWS, STATEMENT_TIMEOUT_S, database_url
from tracker.domain import LOSS, RunLengths
from tracker.queries import claims as _claims
from tracker.queries import compare as _compare
from tracker.queries import tables
from tracker.queries.compare import Comparison
from tracker.queries.export import export_curves
from tracker.queries.job_analysis import database_study
from tracker.queries.runs import RunsView, run_table, runs_page
from tracker.queries.selection import JobSelection
from tracker.store.engine import create_tracker_engine
from tracker.store.sqlite_files import refuse_missing_file
from tracker.summary.version import expectations_digest

if TYPE_CHECKING:
    from tracker.report import Report

# pairs (a key may repeat) or conditions: "val_loss<3.3", Condition("seed", "0", "!=")
Where = Mapping[str, str] | Iterable[tuple[str, str] | str | Condition] | None


class Filters(TypedDict, total=False):
    """The rows ``probes``, ``runs`` and ``trend`` keep, as keywords: only these jobs, models
    and variants (a name or several), jobs with this metadata or runs with this number
    (``where``); and the metadata keys shown as columns (``group_by``)."""

    job: Iterable[str] | str | None
    model: Iterable[str] | str | None
    variant: Iterable[str] | str | None
    where: Where
    group_by: Iterable[str] | str | None


__all__ = [
    "Comparison",
    "Filters",
    "JobSelection",
    "Where",
    "claims",
    "compare",
    "comparison",
    "curve",
    "export",
    "jobs",
    "probes",
    "report",
    "runs",
    "serve",
    "sql",
    "trend",
]


def _selection(
    given: JobSelection | None,
    job: Iterable[str] | str | None = None,
    model: Iterable[str] | str | None = None,
    variant: Iterable[str] | str | None = None,
    where: Where = None,
    group_by: Iterable[str] | str | None = None,
    since: datetime | None = None,
    study: str | None = None,
) -> JobSelection:
    """``given``, or the selection its parts given as keywords make (not both)."""

    def many(value: Iterable[str] | str | None) -> tuple[str, ...]:
        return (value,) if isinstance(value, str) else tuple(value or ())

    parts = (many(job), many(model), many(variant), as_conditions(_pairs(where)), many(group_by))
    keywords = JobSelection(*parts, since=since, study=study)
    if given is None:
        return keywords
    if keywords != JobSelection():
        raise TypeError("give a JobSelection or its parts as keywords, not both")
    return given


def _pairs(where: Where) -> tuple[tuple[str, str] | str | Condition, ...]:
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
    selection: JobSelection | None = None,
    *,
    failed: bool = False,
    **filters: Unpack[Filters],
) -> pl.DataFrame:
    """One row per (job, model, variant): bytes/param, parameters, peak memory."""
    selection = _selection(selection, **filters)
    return with_session(db, lambda s: tables.probes(s, selection, failed=failed))


def runs(
    db: Database = None,
    selection: JobSelection | None = None,
    *,
    aggregate_seeds: bool = False,
    sort: str | None = None,
    limit: int | None = None,
    **filters: Unpack[Filters],
) -> pl.DataFrame:
    """The runs table of ``/api/runs``: one row per arm per job (``RUN_COLUMNS``, its job's
    counts of verdicts by status for the packaged expectations, one column per metadata key);
    or one per (job, model, variant) with seeds aggregated. ``sort`` a column (``-COLUMN``:
    descending; ties and missing values as ``/api/runs`` orders them), ``limit`` the first
    rows only."""
    selection = _selection(selection, **filters)
    if aggregate_seeds:
        table = with_session(db, lambda s: tables.seeds(s, selection))
    else:
        digest = expectations_digest(load_expectations())
        table = with_session(db, lambda s: run_table(s, selection, digest))
    return runs_page(table, RunsView(sort=sort), 0, limit).rows


def trend(
    db: Database,
    metric: str,
    selection: JobSelection | None = None,
    *,
    expectations: Path | None = None,
    **filters: Unpack[Filters],
) -> pl.DataFrame:
    """One probe or run field across jobs in job order, with the change from the previous job
    and the value each job's study expects with its tolerance band."""
    selection = _selection(selection, **filters)
    exp = load_expectations(expectations)
    return with_session(db, lambda s: tables.trend(s, selection, metric, exp))


def curve(
    db: Database,
    arm: Iterable[str] | str,
    *,
    job: Iterable[str] | str | None = None,
    metric: str = LOSS,
    ema: float | None = None,
    every: int = 1,
    start: int | None = None,
    end: int | None = None,
    points: int | None = None,
) -> pl.DataFrame:
    """The points of arms' curves (``ema`` adds a smoothed column); with ``start`` / ``end``
    only those steps, read from the chunks that hold them; with ``points`` each curve
    min/max-downsampled to at most that many, as ``/api/curve`` answers:

        >>> api.curve(None, "ref_s0", job="job2", start=10_000, end=12_000, points=500)
    """
    selection = _selection(None, job)
    arms = (arm,) if isinstance(arm, str) else tuple(arm)
    return with_session(
        db,
        lambda s: tables.curve(
            s,
            selection,
            arms,
            metric=metric,
            ema_alpha=ema,
            every=every,
            window=(start, end),
            points=points,
        ),
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
    selection = _selection(None, job, where=where)
    return with_session(db, lambda s: export_curves(s, selection, Path(directory)))


def comparison(
    db: Database,
    job_a: str,
    job_b: str,
    *,
    expectations: Path | None = None,
    baseline_where: Where = None,
    study: str | None = None,
) -> Comparison:
    """Two jobs compared: the table of ``compare``, its summary line and the regressions.
    The gate's yardstick is the jobs comparable to them (the same values of the
    expectations' ``[gate] configuration`` keys), or those with ``baseline_where``'s metadata.
    ``study``: both jobs must be of it."""
    exp = _judging(expectations, study)
    where = None if baseline_where is None else _equalities(baseline_where)
    return with_session(db, lambda s: _compare.compare_jobs(s, job_a, job_b, exp(s), where, study))


def _equalities(where: Where) -> tuple[tuple[str, str], ...]:
    """``where`` as (key, value) pairs: a yardstick's jobs are chosen by equal metadata."""
    conditions = as_conditions(_pairs(where))
    if any(condition.op != "=" for condition in conditions):
        raise ValueError("baseline_where takes KEY=VALUE conditions only")
    return tuple((condition.key, condition.value) for condition in conditions)


def compare(
    db: Database, job_a: str, job_b: str, *, expectations: Path | None = None
) -> pl.DataFrame:
    """Every verdict of two jobs side by side; the ``change`` column marks regressions."""
    return comparison(db, job_a, job_b, expectations=expectations).table


def _judging(expectations: Path | None, study: str | None) -> Callable[[Session], Expectations]:
    """A user's expectations file (judging every job), else the study ``study``'s (each job
    then judged by its own study's): its file's, read now, else the definition a database
    keeps of it (``database_study``), read in its session."""
    if expectations is not None or study is None or study in study_names():
        exp = _judging_now(expectations, study)
        return lambda _session: exp
    return lambda session: database_study(session, study)


def _judging_now(expectations: Path | None, study: str | None) -> Expectations:
    if expectations is not None:
        return load_expectations(expectations)
    return study_expectations(study) if study is not None else load_expectations()


def claims(
    db: Database = None,
    selection: JobSelection | None = None,
    *,
    job: Iterable[str] | str | None = None,
    where: Where = None,
    group_by: Iterable[str] | str | None = None,
    since: datetime | None = None,
    expectations: Path | None = None,
    study: str | None = None,
    lengths: RunLengths | None = None,
) -> pl.DataFrame:
    """The studies' claims judged on all selected jobs together (only jobs whose ``time`` is
    at or after ``since``; of ``study``, or of every study, each judged apart), one row per
    claim and subject (with ``group_by``, per group of jobs in a ``group`` column); with
    ``lengths``, every comparing claim compares runs by it instead of its study file's."""
    selection = _selection(selection, job, where=where, group_by=group_by, since=since, study=study)
    exp = _judging(expectations, selection.study)
    return with_session(db, lambda s: _claims.claims(s, selection, exp(s), lengths=lengths))


def sql(
    db: Database,
    statement: str,
    timeout_s: float = STATEMENT_TIMEOUT_S,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
) -> pl.DataFrame:
    """One read-only SQL statement's result, stopped after ``timeout_s`` seconds or past
    ``max_rows`` rows or ``max_bytes`` bytes of values."""
    result = sql_result(db, statement, SqlLimits(timeout_s, max_rows, max_bytes))
    return pl.DataFrame(result.rows, schema=result.columns, orient="row")


def report(
    db: Database,
    out: Path,
    selection: JobSelection | None = None,
    *,
    job: Iterable[str] | str | None = None,
    where: Where = None,
    since: datetime | None = None,
    expectations: Path | None = None,
    force: bool = False,
    prune: bool = False,
    study: str | None = None,
) -> Report:
    """Write the offline HTML report of the selected jobs (only jobs whose ``time`` is at or
    after ``since``) under ``out``, rendering only what changed (everything with ``force``,
    which also writes into a folder holding no report); the pages of other jobs stay unless
    they were deleted from the database, or ``prune``. ``study``: only its jobs, and its
    expectations for the pages across jobs (each job's own page: its own study's)."""
    # imported here: the report's templates (jinja2) would add 60 ms to every other command
    from tracker.report import generate_report

    selection = _selection(selection, job, where=where, since=since, study=study)
    exp = _judging(expectations, selection.study)
    return with_session(
        db, lambda s: generate_report(s, out, exp(s), selection, force=force, prune=prune)
    )


def serve(
    db: Database,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    study: str | None = None,
    header_timeout_s: float = 10.0,
    max_connections: int = 500,
) -> None:
    """Serve the workbench read-only on ``host:port`` until interrupted (``tracker serve``);
    ``study``: only its jobs listed and judged together; a client gets ``header_timeout_s``
    to send a request's head, and at most ``max_connections`` are held at once."""
    from tracker.server import create_app  # FastAPI and the server only for this
    from tracker.server.listen import serve as listen
    from tracker.server.security import check_host

    url = db.url.render_as_string(False) if isinstance(db, Engine) else database_url(db)
    check_host(host, token)
    refuse_missing_file(create_tracker_engine(url))  # opened read-only, never created
    # an unknown study (neither a file nor a definition the database keeps) refused here
    listen(create_app(url, token, study), host, port, header_timeout_s, max_connections)

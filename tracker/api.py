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

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

import polars as pl
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis.expectations import load_expectations
from tracker.config import database_url
from tracker.queries import claims as _claims
from tracker.queries import compare as _compare
from tracker.queries import tables
from tracker.queries.compare import Comparison
from tracker.queries.selection import Selection
from tracker.report import Report, generate_report
from tracker.store import catalog
from tracker.store.copy import CopiedJob, copy_job, job_names
from tracker.store.db import (
    HEAD,
    check_schema,
    create_tracker_engine,
    in_write_transaction,
    open_database,
    refuse_missing_file,
)
from tracker.store.readonly import SqlResult, run_readonly_sql

Database = str | Engine | None
Where = Mapping[str, str] | Iterable[tuple[str, str]] | None  # pairs: a key may repeat
Row = catalog.Row
T = TypeVar("T")

__all__ = [
    "HEAD",
    "claims",
    "compare",
    "comparison",
    "connect",
    "copy_jobs",
    "curve",
    "delete",
    "edit_meta",
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


def connect(url: str | None = None) -> Engine:
    """An engine on a ready tracker database (migrated if empty); a missing SQLite file is
    refused, the API only reads."""
    return open_database(database_url(url), may_create_file=False)


def _with_session(db: Database, work: Callable[[Session], T]) -> T:
    engine = db if isinstance(db, Engine) else connect(db)
    try:
        with Session(engine) as session:
            return work(session)
    finally:
        if engine is not db:
            engine.dispose()


def _in_write_transaction(db: Database, work: Callable[[Session], T]) -> T:
    engine = db if isinstance(db, Engine) else connect(db)
    try:
        return in_write_transaction(engine, work)
    finally:
        if engine is not db:
            engine.dispose()


def _selection(
    job: Iterable[str] | str | None,
    model: Iterable[str] | str | None,
    variant: Iterable[str] | str | None,
    where: Where,
    group_by: Iterable[str] | str | None,
) -> Selection:
    def many(value: Iterable[str] | str | None) -> tuple[str, ...]:
        return (value,) if isinstance(value, str) else tuple(value or ())

    pairs = tuple(where.items()) if isinstance(where, Mapping) else tuple(where or ())
    return Selection(many(job), many(model), many(variant), pairs, many(group_by))


def job_rows(db: Database = None) -> list[Row]:
    """Every job with its counts and metadata, in job order, as rows (``jobs`` as a frame)."""
    return _with_session(db, catalog.list_jobs)


def jobs(db: Database = None) -> pl.DataFrame:
    """Every job with its counts and metadata, in job order."""
    return pl.DataFrame(job_rows(db))


SHOW_PARTS = {"probes": catalog.job_probes, "arms": catalog.job_arms}


def show(db: Database, job: str, parts: Iterable[str] = tuple(SHOW_PARTS)) -> dict[str, list[Row]]:
    """One job's tables by name, of ``probes`` (its memory probes) and ``arms`` (its
    training runs)."""
    names = list(parts)
    return _with_session(db, lambda s: {name: SHOW_PARTS[name](s, job) for name in names})


def job_meta(db: Database, job: str) -> dict[str, str]:
    """A job's metadata, by key."""
    return _with_session(db, lambda s: catalog.job_meta(s, job))


def edit_meta(
    db: Database, job: str, meta: Mapping[str, str], unset: Iterable[str] = ()
) -> dict[str, str]:
    """Set and remove a job's metadata keys (``time`` is checked), in one write transaction;
    returns its metadata afterwards."""
    edit = partial(catalog.edit_job_meta, name=job, meta=meta, unset=unset)
    return _in_write_transaction(db, edit)


def delete(db: Database, job: str) -> None:
    """Delete a job and everything ingested with it, in one write transaction."""
    _in_write_transaction(db, partial(catalog.delete_job, name=job))


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
    return _with_session(db, lambda s: tables.probes(s, selection, failed=failed))


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
    return _with_session(db, lambda s: tables.runs(s, selection, aggregate_seeds=aggregate_seeds))


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
    return _with_session(db, lambda s: tables.trend(s, selection, metric))


def curve(
    db: Database,
    arm: Iterable[str] | str,
    *,
    job: Iterable[str] | str | None = None,
    metric: str = "loss",
    ema: float | None = None,
    every: int = 1,
) -> pl.DataFrame:
    """The points of arms' curves (``ema`` adds a smoothed column)."""
    selection = _selection(job, None, None, None, None)
    arms = (arm,) if isinstance(arm, str) else tuple(arm)
    return _with_session(
        db,
        lambda s: tables.curve(s, selection, arms, metric=metric, ema_alpha=ema, every=every),
    )


def comparison(
    db: Database, job_a: str, job_b: str, *, expectations: Path | None = None
) -> Comparison:
    """Two jobs compared: the table of ``compare``, its summary line and the regressions."""
    exp = load_expectations(expectations)
    return _with_session(db, lambda s: _compare.compare_jobs(s, job_a, job_b, exp))


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
    expectations: Path | None = None,
) -> pl.DataFrame:
    """The study's claims judged on all selected jobs together, one row per claim and subject
    (with ``group_by``, per group of jobs in a ``group`` column)."""
    exp = load_expectations(expectations)
    selection = _selection(job, None, None, where, group_by)
    return _with_session(db, lambda s: _claims.claims(s, selection, exp))


def sql_result(db: Database, statement: str) -> SqlResult:
    """One read-only SQL statement's columns and rows, as the database gave them."""
    if isinstance(db, Engine):
        url = db.url.render_as_string(hide_password=False)
    else:
        url = database_url(db)
        connect(url).dispose()  # checks and, if empty, migrates the database first
    return run_readonly_sql(url, statement)


def sql(db: Database, statement: str) -> pl.DataFrame:
    """One read-only SQL statement's result."""
    result = sql_result(db, statement)
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
) -> Report:
    """Write the offline HTML report of the selected jobs (only jobs whose ``time`` is at or
    after ``since``) under ``out``, rendering only what changed (everything with ``force``)."""
    selection = replace(_selection(job, None, None, where, None), since=since)
    exp = load_expectations(expectations)
    return _with_session(db, lambda s: generate_report(s, out, exp, selection, force=force))


def schema_revision(url: str | None = None) -> str | None:
    """The database's schema revision (None: an empty database), read without migrating;
    this tracker's newest is ``HEAD``."""
    engine = create_tracker_engine(database_url(url))
    try:
        refuse_missing_file(engine)
        return check_schema(engine, create=False)
    finally:
        engine.dispose()


def copy_jobs(source: str | Engine, destination: str | Engine) -> Iterator[CopiedJob]:
    """Copy every job the destination lacks, with all its data, one transaction per job,
    oldest first; yields each job's outcome as it is done (a ``conflict`` is not copied)."""
    reader = source if isinstance(source, Engine) else open_database(source, may_create_file=False)
    target = destination if isinstance(destination, Engine) else open_database(destination)
    try:
        with Session(reader) as session:
            for name in job_names(session):
                yield in_write_transaction(target, partial(copy_job, session, name=name))
    finally:
        for engine, given in ((reader, source), (target, destination)):
            if engine is not given:
                engine.dispose()

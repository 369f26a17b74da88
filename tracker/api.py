"""The tracker from Python, for notebooks: the CLI's queries as polars DataFrames.

    >>> from tracker import api
    >>> api.trend(None, "bpp_state", model="gpt-124m", variant="flash")   # default database
    >>> api.runs("postgresql+psycopg://team@db/tracker", aggregate_seeds=True)

Every function takes the database as its first argument: a URL, an ``Engine`` from
``api.connect``, or None for ``TRACKER_DATABASE_URL`` / ``sqlite:///tracker.db`` (which
``jobs``, ``probes`` and ``runs`` also take when it is left out).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import polars as pl
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis.expectations import load_expectations
from tracker.config import database_url
from tracker.domain import LOSS
from tracker.queries import claims as _claims
from tracker.queries import compare as _compare
from tracker.queries import tables
from tracker.queries.selection import Selection
from tracker.store.catalog import list_jobs
from tracker.store.db import open_database
from tracker.store.readonly import run_readonly_sql

Database = str | Engine | None
T = TypeVar("T")

__all__ = ["claims", "compare", "connect", "curve", "jobs", "probes", "runs", "sql", "trend"]


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


def _selection(
    job: Iterable[str] | str | None,
    model: Iterable[str] | str | None,
    variant: Iterable[str] | str | None,
    where: Mapping[str, str] | None,
    group_by: Iterable[str] | str | None,
) -> Selection:
    def many(value: Iterable[str] | str | None) -> tuple[str, ...]:
        return (value,) if isinstance(value, str) else tuple(value or ())

    return Selection(
        many(job), many(model), many(variant), tuple((where or {}).items()), many(group_by)
    )


def jobs(db: Database = None) -> pl.DataFrame:
    """Every job with its counts and metadata, in job order."""
    return pl.DataFrame(_with_session(db, list_jobs))


def probes(
    db: Database = None,
    *,
    job: Iterable[str] | str | None = None,
    model: Iterable[str] | str | None = None,
    variant: Iterable[str] | str | None = None,
    where: Mapping[str, str] | None = None,
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
    where: Mapping[str, str] | None = None,
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
    where: Mapping[str, str] | None = None,
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
    metric: str = LOSS,
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


def compare(
    db: Database, job_a: str, job_b: str, *, expectations: Path | None = None
) -> pl.DataFrame:
    """Every verdict of two jobs side by side; the ``change`` column marks regressions."""
    exp = load_expectations(expectations)
    return _with_session(db, lambda s: _compare.compare_jobs(s, job_a, job_b, exp).table)


def claims(
    db: Database = None,
    *,
    job: Iterable[str] | str | None = None,
    where: Mapping[str, str] | None = None,
    group_by: Iterable[str] | str | None = None,
    expectations: Path | None = None,
) -> pl.DataFrame:
    """The study's claims judged on all selected jobs together, one row per claim and subject
    (with ``group_by``, per group of jobs in a ``group`` column)."""
    exp = load_expectations(expectations)
    selection = _selection(job, None, None, where, group_by)
    return _with_session(db, lambda s: _claims.claims(s, selection, exp))


def sql(db: Database, statement: str) -> pl.DataFrame:
    """One read-only SQL statement's result."""
    if isinstance(db, Engine):
        url = db.url.render_as_string(hide_password=False)
    else:
        url = database_url(db)
        connect(url).dispose()  # checks and, if empty, migrates the database first
    result = run_readonly_sql(url, statement)
    return pl.DataFrame(result.rows, schema=result.columns, orient="row")

"""FastAPI dependencies: the served state, a read-only session per request, the selection."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import jinja2
from fastapi import Depends, HTTPException, Query, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis.expectations import Expectations
from tracker.queries.selection import JobSelection
from tracker.server.cache import DigestCache, HeavyWork
from tracker.server.database import ServedDatabase

JOB_VIEWS = 64  # a job's page holds its figures (~100 KB to 1 MB): the recent ones are kept
ANALYSES = 4096  # verdicts of a job are small: every job of a large study stays cached
CURVES = 256  # downsampled curve windows (<= 2,000 points each), by their step range
PLOT_SERIES = 1024  # a plot's runs downsampled (<= 2,000 points, ~64 KB each), by query
ACROSS_JOBS = 32  # results over all jobs (the jobs list, the index, claims), per selection


@dataclass
class Served:
    """What every request shares: the read-only database, the expectations, the caches and
    the bound on heavy work (a job's page, a curve window, a plot)."""

    database: ServedDatabase
    exp: Expectations
    templates: jinja2.Environment
    token: str | None = None
    study: str | None = None  # only its jobs are listed and judged together
    heavy: HeavyWork = field(default_factory=HeavyWork)
    job_views: DigestCache[Any] = field(init=False)
    analyses: DigestCache[Any] = field(init=False)
    curves: DigestCache[Any] = field(init=False)
    across_jobs: DigestCache[Any] = field(init=False)
    plot_series: DigestCache[Any] = field(init=False)

    def __post_init__(self) -> None:
        self.job_views = DigestCache(JOB_VIEWS, self.heavy)
        self.analyses = DigestCache(ANALYSES)
        self.curves = DigestCache(CURVES, self.heavy)
        self.across_jobs = DigestCache(ACROSS_JOBS)
        self.plot_series = DigestCache(PLOT_SERIES, self.heavy)

    @property
    def engine(self) -> Engine:
        """The engine on the database as it is now (a replaced SQLite file is reopened)."""
        return self.database.engine()


def get_served(request: Request) -> Served:
    served: Served = request.app.state.served
    return served


ServedDep = Annotated[Served, Depends(get_served)]


async def arrival() -> float:
    """When the request arrived (``time.monotonic``): resolved on the event loop, before any
    worker thread is free to take the request."""
    return time.monotonic()


ArrivedDep = Annotated[float, Depends(arrival)]


def get_session(served: ServedDep) -> Iterator[Session]:
    """One read-only session per request: a single snapshot of the database."""
    with Session(served.engine) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def get_selection(
    served: ServedDep,
    job: Annotated[list[str] | None, Query(description="Only this job; repeatable.")] = None,
    model: Annotated[list[str] | None, Query(description="Only this model; repeatable.")] = None,
    variant: Annotated[
        list[str] | None, Query(description="Only this variant; repeatable.")
    ] = None,
    where: Annotated[
        list[str] | None,
        Query(
            description="KEY=VALUE: only jobs with this metadata; or KEY OP VALUE with OP one "
            "of = != < <= > >=, on metadata or a run's numbers (val_loss<3.3, notes=resumed)."
        ),
    ] = None,
    group_by: Annotated[
        list[str] | None, Query(description="Add this metadata as a column; repeatable.")
    ] = None,
) -> JobSelection:
    """The jobs a cross-job query looks at, from the same filters as the CLI's queries."""
    try:
        given = [item for item in where or () if item.strip()]  # a form's empty field
        selection = JobSelection.from_filters(job, model, variant, given, group_by)
        return replace(selection, study=served.study)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=f"where: {exc}") from None


SelectionDep = Annotated[JobSelection, Depends(get_selection)]

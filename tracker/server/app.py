"""The application factory: routers per resource, the security middleware, one-line errors."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import scipy.special  # noqa: F401 (the claims' statistics: loaded before the first request)
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

import tracker
from tracker.analysis.expectations import (
    DEFAULT_STUDY,
    Expectations,
    study_expectations,
    study_names,
)
from tracker.errors import (
    CurveNotFound,
    DamagedCurve,
    DamagedRun,
    DamagedRunIndex,
    DamagedSummary,
    DamagedVerdicts,
    DatabaseBusy,
    DatabaseFailed,
    DatabaseGone,
    DatabaseUnavailable,
    JobNotFound,
    NoSuchDatabase,
    NotATrackerDatabase,
    OutdatedSchema,
    ServerBusy,
    TrackerError,
    UnknownRevision,
)
from tracker.queries.job_analysis import database_study
from tracker.server.database import ServedDatabase
from tracker.server.deps import Served
from tracker.server.error_pages import error_response
from tracker.server.responses import TrackerJSON, templates
from tracker.server.routers import (
    assets,
    auth,
    claims,
    compare,
    curve,
    docs,
    jobs,
    plot,
    runs,
    trend,
)
from tracker.server.security import SECURITY_HEADERS, SecurityMiddleware
from tracker.store.engine import first_line

NOT_FOUND = (JobNotFound, CurveNotFound)
# The database itself failing: 503, which monitoring reads as an outage. Every other expected
# error is about the request (an unknown key, value or metric): 422.
UNAVAILABLE = (
    DatabaseBusy,
    DatabaseFailed,
    DatabaseGone,
    DatabaseUnavailable,
    NoSuchDatabase,
    NotATrackerDatabase,
    OutdatedSchema,
    UnknownRevision,
)
log = logging.getLogger(__name__)


async def _tracker_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TrackerError)
    headers = None
    if isinstance(exc, NOT_FOUND):
        status = 404
    elif isinstance(exc, ServerBusy):
        status, headers = 503, {"Retry-After": str(exc.fields["seconds"])}
    elif isinstance(exc, UNAVAILABLE):
        status = 503
    elif isinstance(
        exc, DamagedCurve | DamagedRun | DamagedRunIndex | DamagedSummary | DamagedVerdicts
    ):
        status = 500  # the stored data is wrong, not the request: the line says which
    else:
        status = 422
    return error_response(request, status, str(exc), headers)


async def _bad_parameter(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())[1:]) or "request"
    return error_response(request, 422, f"bad parameter {where!r}: {first.get('msg', 'invalid')}")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(request, exc.status_code, str(exc.detail), exc.headers)


async def _database_error(request: Request, exc: Exception) -> Response:
    return error_response(request, 503, f"database error: {first_line(exc)}")


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("error serving %s", request.url.path, exc_info=exc)
    # answered outside the middlewares (by Starlette's outermost one): its headers given here
    message = "internal error (the server's log has the details)"
    return error_response(request, 500, message, SECURITY_HEADERS)


# Module-level, not closures over the app: FastAPI caches what it learns of each endpoint and
# lifespan by the function, which would keep every app a process ever made (and its database).
@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    app.state.served.database.close()


def _openapi(request: Request) -> TrackerJSON:
    return TrackerJSON(request.app.openapi())


def _served_study(database: ServedDatabase, study: str | None) -> Expectations:
    """What judges the pages across jobs: ``study``'s file (the default study's without
    one), else the definition the database keeps of it as it starts (``database_study``:
    ``UnknownStudy`` naming the studies of both)."""
    if study is None or study in study_names():
        return study_expectations(study or DEFAULT_STUDY)
    with Session(database.engine()) as session:
        return database_study(session, study)


def create_app(url: str, token: str | None = None, study: str | None = None) -> FastAPI:
    """The live tracker on the database at ``url``, read-only; ``token`` guards every page;
    ``study``: only its jobs listed and judged together (each job by its own study); a
    study of no file here is served by the definition the database keeps of it."""
    database = ServedDatabase(url)
    try:
        exp = _served_study(database, study)
    except BaseException:
        database.close()
        raise
    served = Served(database, exp, templates(), token or None, study)
    app = FastAPI(
        lifespan=_lifespan,
        title="tracker",
        version=tracker.__version__,
        summary="Reproduction studies' results, live and read-only.",
        # FastAPI's own pages would be unguarded, and run inline script: routers/docs.py and
        # the guarded /openapi.json below stand in for them
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.served = served
    app.add_middleware(SecurityMiddleware, token=served.token)
    app.add_exception_handler(TrackerError, _tracker_error)
    app.add_exception_handler(RequestValidationError, _bad_parameter)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(Exception, _unexpected)
    for module in (auth, jobs, runs, claims, compare, trend, curve, plot, assets, docs):
        app.include_router(module.router)
    app.add_api_route("/openapi.json", _openapi, include_in_schema=False)
    return app

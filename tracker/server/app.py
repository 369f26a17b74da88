"""The application factory: routers per resource, the security middleware, one-line errors."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import scipy.special  # noqa: F401 (the claims' statistics: loaded before the first request)
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException

import tracker
from tracker.analysis.expectations import load_expectations
from tracker.errors import (
    CurveNotFound,
    DatabaseBusy,
    DatabaseFailed,
    DatabaseUnavailable,
    JobNotFound,
    NoSuchDatabase,
    NotATrackerDatabase,
    OutdatedSchema,
    TrackerError,
    UnknownRevision,
)
from tracker.server.database import open_read_only
from tracker.server.deps import Served, require_token
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
from tracker.server.security import SecurityMiddleware
from tracker.store.db import first_line

NOT_FOUND = (JobNotFound, CurveNotFound)
# The database itself failing: 503, which monitoring reads as an outage. Every other expected
# error is about the request (an unknown key, value or metric): 422.
UNAVAILABLE = (
    DatabaseBusy,
    DatabaseFailed,
    DatabaseUnavailable,
    NoSuchDatabase,
    NotATrackerDatabase,
    OutdatedSchema,
    UnknownRevision,
)
log = logging.getLogger(__name__)


def _error(
    request: Request, status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """One line, never a traceback: JSON under /api/, plain text for pages."""
    line = message.splitlines()[0] if message else "error"
    if request.url.path.startswith("/api/"):
        return TrackerJSON({"detail": line}, status_code=status, headers=headers)
    return PlainTextResponse(f"Error: {line}\n", status_code=status, headers=headers)


async def _tracker_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, NOT_FOUND):
        status = 404
    elif isinstance(exc, UNAVAILABLE):
        status = 503
    else:
        status = 422
    return _error(request, status, str(exc))


async def _bad_parameter(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())[1:]) or "request"
    return _error(request, 422, f"bad parameter {where!r}: {first.get('msg', 'invalid')}")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(request, exc.status_code, str(exc.detail), exc.headers)


async def _database_error(request: Request, exc: Exception) -> Response:
    return _error(request, 503, f"database error: {first_line(exc)}")


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("error serving %s", request.url.path, exc_info=exc)
    return _error(request, 500, "internal error (the server's log has the details)")


def create_app(url: str, token: str | None = None) -> FastAPI:
    """The live tracker on the database at ``url``, read-only; ``token`` guards every page."""
    served = Served(open_read_only(url), load_expectations(), templates(), token or None)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        served.engine.dispose()

    app = FastAPI(
        lifespan=lifespan,
        title="tracker",
        version=tracker.__version__,
        summary="The FlashOptim reproduction study's results, live and read-only.",
        # FastAPI's own pages would be unguarded, and run inline script: routers/docs.py and
        # the guarded /openapi.json below stand in for them
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.served = served
    app.add_middleware(SecurityMiddleware, loopback_only=served.token is None)
    app.add_exception_handler(TrackerError, _tracker_error)
    app.add_exception_handler(RequestValidationError, _bad_parameter)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(Exception, _unexpected)
    app.include_router(auth.router)
    guarded = [Depends(require_token)]
    for module in (jobs, runs, claims, compare, trend, curve, plot, assets, docs):
        app.include_router(module.router, dependencies=guarded)

    @app.get("/openapi.json", include_in_schema=False, dependencies=guarded)
    def openapi() -> TrackerJSON:
        return TrackerJSON(app.openapi())

    return app

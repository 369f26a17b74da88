"""``/compare?a=&b=``: every verdict of two jobs side by side, regressions first
(``changes_only``: without the rows that stayed the same; ``baseline_where``: the jobs the
changes are judged against, as ``tracker compare --baseline-where``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from tracker.queries.compare import Comparison
from tracker.server import schemas
from tracker.server.deps import Served, ServedDep, SessionDep
from tracker.server.responses import TrackerJSON, page, rows
from tracker.server.views import comparison
from tracker.store.catalog import parse_where
from tracker.views.across_jobs import comparison_view

router = APIRouter(tags=["compare"])
JobA = Annotated[str, Query(description="The earlier job.")]
JobB = Annotated[str, Query(description="The later job.")]
ChangesOnly = Annotated[
    bool, Query(description="Only the rows that changed (as `compare --changes-only`).")
]
BaselineWhere = Annotated[
    list[str] | None,
    Query(description="KEY=VALUE: judge against the jobs with this metadata; repeatable."),
]


def _comparison(
    served: Served, session: Session, a: str, b: str, where: list[str] | None
) -> Comparison:
    pairs = None
    if where is not None:
        try:
            pairs = parse_where(where)
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=f"baseline_where: {exc}") from None
    return comparison(served, session, a, b, pairs)


@router.get("/compare", response_class=HTMLResponse, include_in_schema=False)
def compare_page(
    request: Request,
    a: JobA,
    b: JobB,
    session: SessionDep,
    served: ServedDep,
    changes_only: ChangesOnly = False,
    baseline_where: BaselineWhere = None,
) -> HTMLResponse:
    # the report links a job as quote(FOLDER)/index.html: here the folder is /jobs/NAME
    folders = {name: f"/jobs/{name}" for name in (a, b)}
    found = _comparison(served, session, a, b, baseline_where)
    view = comparison_view(found, folders, changes_only)
    roles = (served.exp.training.candidate, served.exp.training.baseline)
    plot_runs = [f"{job}/{arm}" for job in (a, b) for arm in roles]
    return page(request, "server/compare.html", c=view, plot_runs=plot_runs)


@router.get("/api/compare", response_class=TrackerJSON, response_model=schemas.Comparison)
def api_compare(
    a: JobA,
    b: JobB,
    session: SessionDep,
    served: ServedDep,
    changes_only: ChangesOnly = False,
    baseline_where: BaselineWhere = None,
) -> TrackerJSON:
    """Every verdict of two jobs side by side (``tracker.api.compare``), regressions first."""
    result = _comparison(served, session, a, b, baseline_where)
    result = result.changes_only() if changes_only else result
    return TrackerJSON(
        {"a": a, "b": b, "regressions": result.regressions, "table": rows(result.table)}
    )

"""``/compare?a=&b=``: every verdict of two jobs side by side, regressions first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from tracker.server.deps import ServedDep, SessionDep
from tracker.server.page_cache import comparison
from tracker.server.responses import TrackerJSON, page, rows
from tracker.server.schemas import Comparison
from tracker.views.across_jobs import comparison_view

router = APIRouter(tags=["compare"])
JobA = Annotated[str, Query(description="The earlier job.")]
JobB = Annotated[str, Query(description="The later job.")]


@router.get("/compare", response_class=HTMLResponse, include_in_schema=False)
def compare_page(
    request: Request, a: JobA, b: JobB, session: SessionDep, served: ServedDep
) -> HTMLResponse:
    # the report links a job as quote(FOLDER)/index.html: here the folder is /jobs/NAME
    folders = {name: f"/jobs/{name}" for name in (a, b)}
    view = comparison_view(comparison(served, session, a, b), folders)
    roles = (served.exp.training.candidate, served.exp.training.baseline)
    plot_runs = [f"{job}/{arm}" for job in (a, b) for arm in roles]
    return page(request, "server/compare.html", c=view, plot_runs=plot_runs)


@router.get("/api/compare", response_class=TrackerJSON, response_model=Comparison)
def api_compare(a: JobA, b: JobB, session: SessionDep, served: ServedDep) -> Comparison:
    """Every verdict of two jobs side by side (``tracker.api.compare``), with regressions."""
    result = comparison(served, session, a, b)
    return Comparison.model_validate(
        {"a": a, "b": b, "regressions": result.regressions, "table": rows(result.table)}
    )

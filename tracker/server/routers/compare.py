"""``/compare?a=&b=``: every verdict of two jobs side by side, regressions first
(``changes_only``: without the rows that stayed the same; ``baseline_where``: the jobs the
changes are judged against, as ``tracker compare --baseline-where``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from tracker.queries.compare import Comparison
from tracker.server import schemas
from tracker.server.deps import ServedDep, SessionDep
from tracker.server.page_cache import comparison
from tracker.server.responses import TrackerJSON, page, rows
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


def compared(
    a: JobA, b: JobB, session: SessionDep, served: ServedDep, baseline_where: BaselineWhere = None
) -> Comparison:
    """The comparison a page or its JSON twin shows (``tracker compare``'s)."""
    pairs = None
    if baseline_where is not None:
        try:
            conditions = parse_where(baseline_where)
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=f"baseline_where: {exc}") from None
        if any(condition.op != "=" for condition in conditions):
            raise HTTPException(status_code=422, detail="baseline_where: KEY=VALUE only")
        pairs = [(condition.key, condition.value) for condition in conditions]
    return comparison(served, session, a, b, pairs)


ComparedDep = Annotated[Comparison, Depends(compared)]


@router.get("/compare", response_class=HTMLResponse, include_in_schema=False)
def compare_page(
    request: Request, found: ComparedDep, served: ServedDep, changes_only: ChangesOnly = False
) -> HTMLResponse:
    a, b = found.job_a, found.job_b
    # the report links a job as quote(FOLDER)/index.html: here the folder is /jobs/NAME
    folders = {name: f"/jobs/{name}" for name in (a, b)}
    view = comparison_view(found, folders, changes_only)
    roles = (served.exp.training.candidate, served.exp.training.baseline)
    plot_runs = [f"{job}/{arm}" for job in (a, b) for arm in roles]
    return page(request, "server/compare.html", c=view, plot_runs=plot_runs)


@router.get("/api/compare", response_class=TrackerJSON, response_model=schemas.Comparison)
def api_compare(found: ComparedDep, changes_only: ChangesOnly = False) -> schemas.Comparison:
    """Every verdict of two jobs side by side (``tracker.api.compare``), regressions first."""
    result = found.changes_only() if changes_only else found
    return schemas.Comparison.model_validate(
        {
            "a": found.job_a,
            "b": found.job_b,
            "regressions": result.regressions,
            "within_noise": result.within_noise,
            "table": rows(result.table),
        }
    )

"""``/compare?a=&b=``: every verdict of two jobs side by side, regressions first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from tracker.report.crossjob import CHANGE_ORDER
from tracker.server.deps import ServedDep, SessionDep
from tracker.server.responses import TrackerJSON, page, rows
from tracker.server.views import comparison

router = APIRouter(tags=["compare"])
JobA = Annotated[str, Query(description="The earlier job.")]
JobB = Annotated[str, Query(description="The later job.")]


@router.get("/compare", response_class=HTMLResponse, include_in_schema=False)
def compare_page(
    request: Request, a: JobA, b: JobB, session: SessionDep, served: ServedDep
) -> HTMLResponse:
    import polars as pl

    result = comparison(served, session, a, b)
    rank = {change: i for i, change in enumerate(CHANGE_ORDER)}
    ordered = result.table.with_row_index("row").sort(
        pl.col("change").replace_strict(rank, default=len(rank), return_dtype=pl.Int64), "row"
    )
    tally = ordered.group_by("change", maintain_order=True).len()
    return page(
        request,
        "compare.html",
        result=result,
        table=rows(ordered),
        tally=dict(tally.iter_rows()),
    )


@router.get("/api/compare", response_class=TrackerJSON)
def api_compare(a: JobA, b: JobB, session: SessionDep, served: ServedDep) -> TrackerJSON:
    """Every verdict of two jobs side by side (``tracker.api.compare``), with regressions."""
    result = comparison(served, session, a, b)
    return TrackerJSON(
        {"a": a, "b": b, "regressions": result.regressions, "table": rows(result.table)}
    )

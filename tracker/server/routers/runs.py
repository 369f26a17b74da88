"""``/runs``: every arm across the selected jobs, sorted, filtered and paged on the server,
its view in the URL; ``/api/runs`` (and ``/api/runs.csv``) its twin; ``/api/probes``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import urlencode

import polars as pl
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from tracker.errors import BadWhere, UnknownColumn, UnknownMetaKey, UnknownStatus
from tracker.queries import tables
from tracker.queries.runs import META_PREFIX, STATUSES, RunsPage, RunsView, run_table, runs_page
from tracker.queries.selection import JobSelection
from tracker.row_formats import Format, render
from tracker.server.deps import SelectionDep, Served, ServedDep, SessionDep
from tracker.server.page_cache import catalog_state
from tracker.server.responses import TrackerJSON, page, rows
from tracker.server.schemas import ProbeTableRow, RunsTable, RunTableRow
from tracker.summary.version import expectations_digest

router = APIRouter(tags=["runs"])
PAGE_SIZE = 100
COMPACT_TIME = "%Y-%m-%d %H:%M"  # the page's: to the minute, UTC (the JSON's to the second)
MAX_PAGE = 10_000
MAX_OFFSET = 1_000_000_000  # past any table's rows; 2**63 would overflow the slice
# what a view refuses: a 422 naming the known columns, statuses or keys
BAD_VIEW = (UnknownColumn, UnknownStatus, UnknownMetaKey, BadWhere)


class TableFormat(StrEnum):
    json = "json"
    csv = "csv"


def get_view(
    sort: Annotated[
        str | None, Query(description="Sort by this column; -COLUMN: descending.")
    ] = None,
    q: Annotated[str, Query(description="Only rows whose job, arm, model, variant or "
                            "metadata holds every word (case-insensitive).")] = "",
    verdict: Annotated[
        str | None, Query(description="Only rows whose job has a verdict of this status.")
    ] = None,
    columns: Annotated[
        list[str] | None, Query(description="Only these columns: a,b,c; repeatable.")
    ] = None,
) -> RunsView:  # fmt: skip
    chosen = tuple(name for item in columns or () for name in item.split(",") if name)
    twice = sorted({name for name in chosen if chosen.count(name) > 1})
    if twice:  # a frame cannot hold a column twice
        raise HTTPException(status_code=422, detail=f"column {twice[0]!r} is asked for twice")
    return RunsView(sort=sort or None, q=q, verdict=verdict or None, columns=chosen)


ViewDep = Annotated[RunsView, Depends(get_view)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="First row of the page (0-based).")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Rows per page.")]


@dataclass(frozen=True)
class Asked:
    """A page of the runs table as the URL asks for it."""

    selection: JobSelection
    view: RunsView
    offset: int
    limit: int


def get_asked(
    selection: SelectionDep, view: ViewDep, offset: Offset = 0, limit: Limit = PAGE_SIZE
) -> Asked:
    return Asked(selection, view, offset, limit)


AskedDep = Annotated[Asked, Depends(get_asked)]


def _table(served: Served, session: SessionDep, selection: JobSelection) -> pl.DataFrame:
    """The whole runs table of a selection, kept until a job or its metadata changes."""
    key = ("runs", catalog_state(session), selection)
    digest = expectations_digest(served.exp)
    return served.across_jobs.get(key, lambda: run_table(session, selection, digest))


def _page(
    served: Served,
    session: SessionDep,
    selection: JobSelection,
    view: RunsView,
    at: tuple[int, int | None],
) -> RunsPage:
    try:
        return runs_page(_table(served, session, selection), view, *at)
    except BAD_VIEW as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None


def _csv(frame: pl.DataFrame) -> Response:
    body = render(rows(frame), Format.csv, frame.columns) + "\n"
    headers = {"Content-Disposition": 'attachment; filename="runs.csv"'}
    return Response(body, media_type="text/csv; charset=utf-8", headers=headers)


@router.get("/api/runs", response_class=TrackerJSON, response_model=RunsTable)
def api_runs(
    asked: AskedDep,
    session: SessionDep,
    served: ServedDep,
    format: Annotated[
        TableFormat, Query(description="csv: every matching row, as /api/runs.csv.")
    ] = TableFormat.json,
) -> RunsTable | Response:
    """One row per arm across the selected jobs with its job's verdict counts and metadata;
    sorted, filtered and paged (``tracker.queries.runs``)."""
    selection, view, offset, limit = asked.selection, asked.view, asked.offset, asked.limit
    if format is TableFormat.csv:
        return _csv(_page(served, session, selection, view, (0, None)).rows)
    found = _page(served, session, selection, view, (offset, limit))
    return RunsTable(
        total=found.total,
        offset=offset,
        limit=limit,
        columns=found.rows.columns,
        rows=[RunTableRow.model_validate(row) for row in rows(found.rows)],
    )


# described by /api/runs' format=csv: the schema lists JSON answers only
@router.get("/api/runs.csv", response_class=Response, include_in_schema=False)
def api_runs_csv(
    selection: SelectionDep, view: ViewDep, session: SessionDep, served: ServedDep
) -> Response:
    """Every row ``/api/runs`` matches (no paging), as CSV."""
    return _csv(_page(served, session, selection, view, (0, None)).rows)


def _readable_times(frame: pl.DataFrame, form: str = "%Y-%m-%dT%H:%M:%SZ") -> pl.DataFrame:
    """Times as everywhere else in the tracker: ISO 8601 in UTC to the second."""
    if "time" not in frame.columns:
        return frame
    return frame.with_columns(pl.col("time").dt.strftime(form))


def _left_out(frame: pl.DataFrame) -> dict[str, str]:
    """The columns of ``frame`` that would only take width from the others, each with why:
    empty in every row, or a ``meta.time`` that is the ``time`` column (the job's time is
    its time metadata when it has one). None when ``frame`` has no row."""
    if frame.height == 0:
        return {}
    why = {
        name: "empty here"
        for name, column in frame.to_dict().items()
        if (column.is_null() | (column.cast(pl.String) == "")).all()
    }
    repeated = f"{META_PREFIX}time"
    if repeated in frame.columns and "time" in frame.columns:
        shown = frame.get_column("time").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        if (shown == frame.get_column(repeated)).all():
            why[repeated] = "the time column"
    return why


def _link(request: Request, **changes: Any) -> str:
    """This page's URL with some parameters changed (None: removed)."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in changes]
    kept += [(k, str(v)) for k, v in changes.items() if v is not None]
    return f"{request.url.path}?{urlencode(kept)}" if kept else request.url.path


def _sort_links(request: Request, columns: list[str], sort: str | None) -> dict[str, str]:
    """Per column, the URL sorting by it: ascending, or descending when it is sorted so."""
    return {c: _link(request, sort=f"-{c}" if sort == c else c, offset=None) for c in columns}


@router.get("/runs", response_class=HTMLResponse, include_in_schema=False)
def runs_table_page(
    request: Request, asked: AskedDep, session: SessionDep, served: ServedDep
) -> HTMLResponse:
    selection, view, offset, limit = asked.selection, asked.view, asked.offset, asked.limit
    found = _page(served, session, selection, view, (offset, limit))
    every = _table(served, session, selection).columns
    # the default view leaves out what this page has nothing in; columns asked for all show
    left_out = {} if view.columns else _left_out(found.rows)
    query = request.url.query
    return page(
        request,
        "server/runs.html",
        found=found,
        table=rows(_readable_times(found.rows, COMPACT_TIME)),
        columns=[c for c in found.rows.columns if c not in left_out],
        left_out=left_out,
        every=every,
        view=view,
        selection=selection,
        statuses=STATUSES,
        sort_links=_sort_links(request, found.rows.columns, view.sort),
        previous=_link(request, offset=max(0, offset - limit)) if offset > 0 else None,
        following=_link(request, offset=offset + limit) if offset + limit < found.total else None,
        limit=limit,
        csv_href=f"/api/runs.csv?{query}" if query else "/api/runs.csv",
        json_href=f"/api/runs?{query}" if query else "/api/runs",
    )


@router.get("/api/probes", response_class=TrackerJSON, response_model=list[ProbeTableRow])
def api_probes(
    selection: SelectionDep,
    session: SessionDep,
    failed: Annotated[bool, Query(description="Only failed probes.")] = False,
) -> list[ProbeTableRow]:
    """One row per (job, model, variant): bytes/param, parameters, peak memory
    (``tracker.api.probes``)."""
    try:
        table = tables.probes(session, selection, failed=failed)
    except (UnknownMetaKey, BadWhere) as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return [ProbeTableRow.model_validate(row) for row in rows(table)]

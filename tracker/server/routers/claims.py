"""``/claims``: the study's claims judged on all (or the selected) jobs together, not
reproduced first, filtered by ``status=`` (``/api/claims`` lists them as judged)."""

from __future__ import annotations

from typing import Annotated

import polars as pl
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BeforeValidator
from sqlalchemy.orm import Session

from tracker.domain import ClaimStatus
from tracker.queries.claims import claims
from tracker.queries.selection import JobSelection, selected_jobs
from tracker.server.deps import SelectionDep, Served, ServedDep, SessionDep
from tracker.server.page_cache import ServerKeeping, catalog_state
from tracker.server.responses import TrackerJSON, page, rows
from tracker.server.schemas import ClaimRow
from tracker.views.values import CLAIM_ORDER, claim_rows

router = APIRouter(tags=["claims"])
CLAIMS_NOTE = "No claim can be judged: no job is selected."
# the form's "any" sends status= empty: no filter
StatusFilter = Annotated[
    ClaimStatus | None,
    BeforeValidator(lambda value: value or None),
    Query(description="Only the claims of this status, e.g. MIXED."),
]


def claims_table(served: Served, session: Session, selection: JobSelection) -> pl.DataFrame:
    """The claims, kept until a job is added, replaced, deleted or its metadata changes (the
    home page's too: ``ServerKeeping``)."""
    keeping = ServerKeeping(served, catalog_state(session))
    return keeping.claims(selection, lambda: claims(session, selection, served.exp))


@router.get("/claims", response_class=HTMLResponse, include_in_schema=False)
def claims_page(
    request: Request,
    selection: SelectionDep,
    session: SessionDep,
    served: ServedDep,
    status: StatusFilter = None,
) -> HTMLResponse:
    table = claims_table(served, session, selection)
    return page(
        request,
        "server/claims.html",
        selection=selection,
        rows=selected_jobs(session, selection).get_column("job").to_list(),
        statuses=CLAIM_ORDER,
        status=status,
        claims=claim_rows(rows(table), status),
        claims_note=CLAIMS_NOTE if status is None else f"No claim is {status}.",
        claims_json="/api/claims",
        live=True,
    )


@router.get(
    "/claims.json",
    response_class=TrackerJSON,
    response_model=list[ClaimRow],
    include_in_schema=False,
)
@router.get("/api/claims", response_class=TrackerJSON, response_model=list[ClaimRow])
def api_claims(selection: SelectionDep, session: SessionDep, served: ServedDep) -> list[ClaimRow]:
    """One row per claim and subject over the selected jobs (``job``, ``where``); with
    ``group_by`` one set of rows per group of jobs (``tracker.api.claims``)."""
    return [ClaimRow.model_validate(row) for row in rows(claims_table(served, session, selection))]

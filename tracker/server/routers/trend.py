"""``/trend?metric=``: one figure of merit across jobs over job time, one figure per model."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from tracker.figures.trend import HEIGHT, trend_figures
from tracker.queries.tables import PROBE_METRICS, RUN_METRICS, trend
from tracker.server.deps import SelectionDep, ServedDep, SessionDep
from tracker.server.responses import TrackerJSON, page, rows
from tracker.server.schemas import TrendRow
from tracker.views.pages import figure_slot

router = APIRouter(tags=["trend"])
Metric = Annotated[str, Query(description="A probe or run field, e.g. bpp_state, val_loss.")]


@router.get("/trend", response_class=HTMLResponse, include_in_schema=False)
def trend_page(
    request: Request,
    selection: SelectionDep,
    session: SessionDep,
    served: ServedDep,
    metric: Metric = "val_loss",
) -> HTMLResponse:
    table = trend(session, selection, metric, served.exp)
    slots = [
        figure_slot(fig, f"trend-{i}", model or metric, fig["layout"].get("height", HEIGHT))
        for i, (model, fig) in enumerate(trend_figures(table, metric), start=1)
    ]
    return page(
        request,
        "server/trend.html",
        metric=metric,
        metrics=(*PROBE_METRICS, *RUN_METRICS),
        selection=selection,
        slots=slots,
        columns=table.columns,
        table=rows(table),
    )


@router.get("/api/trend", response_class=TrackerJSON, response_model=list[TrendRow])
def api_trend(
    metric: Metric, selection: SelectionDep, session: SessionDep, served: ServedDep
) -> list[TrendRow]:
    """One probe or run field across jobs with the change from the previous job and the
    value each job's study expects with its tolerance band (``tracker.api.trend``)."""
    table = trend(session, selection, metric, served.exp)
    return [TrendRow.model_validate(row) for row in rows(table)]

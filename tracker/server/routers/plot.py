"""``/plot``: chosen runs' curves of one metric on one figure, smoothed, on a linear or log
axis, against the step or the wall time, coloured or grouped by a run field or metadata key.
The URL holds the whole view; the page asks ``/api/plot`` (the same query) again for the
visible steps (with x=time: the visible seconds) on every zoom."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.orm import Session

from tracker.domain import LOSS
from tracker.errors import UnknownMetric, known_names
from tracker.jsonio import to_api_json
from tracker.queries.plot import (
    MAX_POINTS,
    MAX_RUNS,
    PlotQuery,
    parse_run,
    plot_choices,
    plot_rows,
    plot_series,
)
from tracker.row_formats import Format, render
from tracker.server.deps import ArrivedDep, Served, ServedDep, SessionDep
from tracker.server.responses import page
from tracker.server.schemas import Plot, write_arrays

router = APIRouter(tags=["plot"])
Runs = Annotated[
    list[str] | None,
    Query(description=f"JOB/ARM, e.g. job2/ref_s0; repeatable, at most {MAX_RUNS}."),
]
Metric = Annotated[str, Query(description="Curve column: loss, lr, step_ms, ...")]
Smooth = Annotated[
    float,
    Query(ge=0.0, lt=1.0, description="Smoothing weight (EMA alpha = 1 - smooth); 0: raw only."),
]
Axis = Annotated[str, Query(pattern="^(linear|log)$", description="The y axis: linear or log.")]
Start = Annotated[int | None, Query(description="First step of the window (default: first).")]
End = Annotated[int | None, Query(description="Last step of the window (default: last).")]
Key = Annotated[str | None, Query(description="job, arm, model, variant, seed or a metadata key.")]
Band = Annotated[bool, Query(description="With group: a min-max band around each mean.")]
X = Annotated[
    str,
    Query(
        pattern="^(step|time)$",
        description="The x axis: step, or time (seconds since the run started, from a "
        "time column: elapsed, else per-step durations summed, else a running average; "
        "every run needs one).",
    ),
]
SmoothBy = Annotated[
    str,
    Query(
        pattern="^(step|point)$",
        description="step: the EMA per step, so a curve logged every 125 steps smooths as "
        "if logged every step; point: TensorBoard's, per logged point.",
    ),
]
StartS = Annotated[float | None, Query(description="With x=time: first second of the window.")]
EndS = Annotated[float | None, Query(description="With x=time: last second of the window.")]


class PlotJSON(JSONResponse):
    """``TrackerJSON``'s policy, with the plot's numpy arrays written by the json module's C
    encoder (``tracker.server.schemas.write_arrays``)."""

    def render(self, content: Any) -> bytes:
        return write_arrays(to_api_json(content)).encode("utf-8")


def plot_query(
    run: Runs = None,
    metric: Metric = LOSS,
    smooth: Smooth = 0.0,
    start: Start = None,
    end: End = None,
    color: Key = None,
    group: Key = None,
    band: Band = False,
    x: X = "step",
    start_s: StartS = None,
    end_s: EndS = None,
    smooth_by: SmoothBy = "step",
) -> PlotQuery:
    """What /api/plot and /api/plot.csv are asked for, from the URL."""
    runs = tuple(parse_run(text) for text in run or ())
    keys = (color or None, group or None)
    return PlotQuery(
        runs,
        metric,
        smooth,
        start,
        end,
        *keys,
        band,
        x=x,
        start_s=start_s,
        end_s=end_s,
        smooth_by=smooth_by,
    )


PlotQueryDep = Annotated[PlotQuery, Depends(plot_query)]


def _plot(served: Served, session: Session, query: PlotQuery, arrived: float) -> dict[str, Any]:
    """The plot within one heavy slot for the whole computation (a request of 50 runs is one
    slot, not 50 slots taken in turn while other requests hold their own curves too), its
    patience counted from its arrival."""
    with served.heavy.slot(arrived):
        return plot_series(session, query, served.plot_series)


@router.get("/plot", response_class=HTMLResponse, include_in_schema=False)
def plot_page(
    request: Request,
    session: SessionDep,
    run: Runs = None,
    metric: Metric = LOSS,
    y: Axis = "linear",
) -> HTMLResponse:
    runs = [parse_run(text) for text in run or ()]
    choices = plot_choices(session, runs) if runs else {"metrics": [], "keys": [], "x": ["step"]}
    # a metric none of the runs has: said on the page, which then asks for no plot
    unknown = runs and metric not in choices["metrics"]
    known = known_names(choices["metrics"], near=metric)
    return page(
        request,
        "server/plot.html",
        runs=[f"{job}/{arm}" for job, arm in runs],
        metric=metric,
        problem=str(UnknownMetric(metric=metric, known=known)) if unknown else "",
        choices=choices,
        max_runs=MAX_RUNS,
        points=MAX_POINTS,
    )


@router.get("/api/plot", response_class=PlotJSON, response_model=Plot)
def api_plot(
    arrived: ArrivedDep,
    query: PlotQueryDep,
    session: SessionDep,
    served: ServedDep,
    y: Axis = "linear",
) -> Plot:
    """One series per run: the steps from ``start`` to ``end``, raw and smoothed values
    (the whole curve smoothed, then cut), every raw point when the window holds at most
    2,000, else min/max downsampled; with ``group`` each group's mean (and ``band``); with
    ``x=time`` each point's wall time too, and ``start_s``/``end_s`` a window of seconds."""
    return Plot.model_validate({**_plot(served, session, query, arrived), "y": y})


@router.get("/api/plot.csv", include_in_schema=False)
def api_plot_csv(
    arrived: ArrivedDep, query: PlotQueryDep, session: SessionDep, served: ServedDep
) -> Response:
    """What ``/api/plot`` draws as CSV: job, arm, metric, step, (with x=time) time, value,
    smoothed."""
    time = ["time"] if query.x == "time" else []
    columns = ["job", "arm", "metric", "step", *time, "value", "smoothed"]
    text = render(plot_rows(_plot(served, session, query, arrived)), Format.csv, columns)
    return Response(text + "\n", media_type="text/csv")

"""``/curve``: the curve explorer. The page draws a min/max-downsampled curve; zooming asks
``/api/curve`` for the visible step range, read alone (``tracker.queries.window``: one or two
chunks), so a window of fewer steps than ``points`` shows every raw point."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from tracker.domain import LOSS, MIN_WINDOW_POINTS
from tracker.queries.window import check_window, read_window
from tracker.server.deps import Served, ServedDep, SessionDep
from tracker.server.page_cache import job_digest
from tracker.server.responses import TrackerJSON, page
from tracker.server.schemas import CurveWindow
from tracker.store.catalog import job_curves
from tracker.store.curves import find_curve
from tracker.store.run_rows import checked_runs
from tracker.summary.downsample import DEFAULT_MAX_POINTS

router = APIRouter(tags=["curve"])
JobName = Annotated[str, Query(description="Job name.")]
Arm = Annotated[str, Query(description="Arm name, e.g. ref_s0.")]
Metric = Annotated[str, Query(description="Curve column.")]
Start = Annotated[int | None, Query(description="First step of the window (default: first).")]
End = Annotated[int | None, Query(description="Last step of the window (default: last).")]
Points = Annotated[
    int,
    Query(
        ge=MIN_WINDOW_POINTS,
        le=DEFAULT_MAX_POINTS,  # the bound of /api/plot too: an answer stays small
        description="At most this many points (min/max downsampled).",
    ),
]


def curve_window(
    served: Served,
    session: Session,
    job: str,
    arm: str,
    metric: str,
    steps: tuple[int | None, int | None],
    points: int,
) -> dict[str, Any]:
    """The points of one curve between two steps, downsampled to at most ``points``."""
    check_window(*steps, points)
    digest = job_digest(session, job)
    curve = find_curve(session, job, arm, metric)
    about = {
        "job": job,
        "arm": arm,
        "metric": metric,
        "first_step": curve.first_step,
        "last_step": curve.last_step,
        "total": curve.n_points,
    }

    def window() -> dict[str, Any]:
        read = read_window(session, curve, *steps, points)
        answer = {"start": read.start, "end": read.end, "in_window": read.in_window}
        if read.start is None:
            return {**answer, "raw": True}
        return {**answer, "raw": read.raw, "step": read.step.tolist(), "value": read.value.tolist()}

    # kept by range: the explorer's first view (the whole curve) and every zoom asked again
    answer = {**about, **served.curves.get((digest, arm, metric, *steps, points), window)}
    checked_runs(session, [curve.run.job_id])  # after the points, as tables.curve says why
    return answer


@router.get("/curve", response_class=HTMLResponse, include_in_schema=False)
def curve_page(
    request: Request, job: JobName, arm: Arm, session: SessionDep, metric: Metric = LOSS
) -> HTMLResponse:
    curve = find_curve(session, job, arm, metric)
    return page(
        request,
        "server/curve.html",
        job=job,
        arm=arm,
        metric=metric,
        curve=curve,
        others=job_curves(session, job),
        points=DEFAULT_MAX_POINTS,
    )


# unset: a curve without points has no step and value lists
@router.get(
    "/api/curve",
    response_class=TrackerJSON,
    response_model=CurveWindow,
    response_model_exclude_unset=True,
)
def api_curve(
    job: JobName,
    arm: Arm,
    session: SessionDep,
    served: ServedDep,
    metric: Metric = LOSS,
    start: Start = None,
    end: End = None,
    points: Points = DEFAULT_MAX_POINTS,
) -> CurveWindow:
    """One curve's points from ``start`` to ``end``: every point when the window holds at
    most ``points``, else a min/max downsampling that keeps its envelope and gaps."""
    window = curve_window(served, session, job, arm, metric, (start, end), points)
    return CurveWindow.model_validate(window)

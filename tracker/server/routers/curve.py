"""``/curve``: the curve explorer. The page draws a min/max-downsampled curve; zooming asks
``/api/curve`` for the visible step range, read alone (one or two chunks, found through their
(curve_id, first_step) key), so a window of fewer steps than ``points`` shows every raw
point."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from tracker.domain import LOSS
from tracker.server.deps import Served, ServedDep, SessionDep
from tracker.server.page_cache import job_digest
from tracker.server.responses import TrackerJSON, page
from tracker.server.schemas import CurveWindow
from tracker.store.catalog import job_curves
from tracker.store.curves import find_curve, load_curves
from tracker.summary.downsample import DEFAULT_MAX_POINTS, minmax_indices

router = APIRouter(tags=["curve"])
JobName = Annotated[str, Query(description="Job name.")]
Arm = Annotated[str, Query(description="Arm name, e.g. ref_s0.")]
Metric = Annotated[str, Query(description="Curve column.")]
Start = Annotated[int | None, Query(description="First step of the window (default: first).")]
End = Annotated[int | None, Query(description="Last step of the window (default: last).")]
Points = Annotated[
    int,
    Query(
        ge=10,
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
    if steps[0] is not None and steps[1] is not None and steps[0] > steps[1]:
        raise HTTPException(status_code=422, detail="start must not exceed end")
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
    if curve.first_step is None or curve.last_step is None:
        return {**about, "start": None, "end": None, "in_window": 0, "raw": True}
    start = curve.first_step if steps[0] is None else steps[0]
    end = curve.last_step if steps[1] is None else steps[1]

    def window() -> dict[str, Any]:
        frame = load_curves(session, [curve.id], (start, end))
        keep = minmax_indices(frame.get_column("value").to_numpy(), points)
        return {
            "start": start,
            "end": end,
            "in_window": frame.height,
            "raw": len(keep) == frame.height,
            "step": frame.get_column("step").gather(keep).to_list(),
            "value": frame.get_column("value").gather(keep).to_list(),
        }

    # kept by range: the explorer's first view (the whole curve) and every zoom asked again
    return {**about, **served.curves.get((digest, arm, metric, start, end, points), window)}


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

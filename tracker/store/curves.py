"""Reading curve points back as polars frames (NULL points are NaN, see tracker.models)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.errors import CurveNotFound
from tracker.models import Curve, Job, Point, Run

if TYPE_CHECKING:
    import polars as pl


def load_curves(
    session: Session, curve_ids: list[int], steps: tuple[int, int] | None = None
) -> pl.DataFrame:
    """Points of many curves in one query: ``curve_id``, ``step``, ``value``, step-ordered;
    with ``steps`` only those from the first to the last step given (both included), read
    through the (curve_id, step) key.

    Rows come straight from the driver's cursor: building ORM rows for a million points
    would cost more than the query itself.
    """
    import polars as pl

    schema = {"curve_id": pl.Int64, "step": pl.Int64, "value": pl.Float64}
    if not curve_ids:
        return pl.DataFrame(schema=schema)
    query = (
        select(Point.curve_id, Point.step, Point.value)
        .where(Point.curve_id.in_(curve_ids))
        .order_by(Point.curve_id, Point.step)
    )
    if steps is not None:
        query = query.where(Point.step.between(*steps))
    rows = session.connection().execute(query).cursor.fetchall()
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame.with_columns(pl.col("value").fill_null(float("nan")))


def find_curve(session: Session, job: str, arm: str, metric: str = "loss") -> Curve:
    """One arm's curve row (its summary, no points)."""
    curve = session.scalar(
        select(Curve)
        .join(Run, Run.id == Curve.run_id)
        .join(Job, Job.id == Run.job_id)
        .where(Job.name == job, Run.arm == arm, Curve.metric == metric)
    )
    if curve is None:
        raise CurveNotFound(job=job, arm=arm, metric=metric)
    return curve


def load_curve(
    session: Session,
    job: str,
    arm: str,
    metric: str = "loss",
    steps: tuple[int, int] | None = None,
) -> pl.DataFrame:
    """One arm's curve, or its points from ``steps[0]`` to ``steps[1]``: ``step`` and ``value``."""
    curve = find_curve(session, job, arm, metric)
    return load_curves(session, [curve.id], steps).drop("curve_id")

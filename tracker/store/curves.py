"""Reading curve points back as polars frames (NULL points are NaN, see tracker.models)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.errors import CurveNotFound
from tracker.models import Curve, Job, Point, Run

if TYPE_CHECKING:
    import polars as pl


def load_curves(session: Session, curve_ids: list[int]) -> pl.DataFrame:
    """Points of many curves in one query: ``curve_id``, ``step``, ``value``, step-ordered.

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
    rows = session.connection().execute(query).cursor.fetchall()
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame.with_columns(pl.col("value").fill_null(float("nan")))


def load_curve(session: Session, job: str, arm: str, metric: str = "loss") -> pl.DataFrame:
    """One arm's curve: ``step`` and ``value``."""
    curve_id = session.scalar(
        select(Curve.id)
        .join(Run, Run.id == Curve.run_id)
        .join(Job, Job.id == Run.job_id)
        .where(Job.name == job, Run.arm == arm, Curve.metric == metric)
    )
    if curve_id is None:
        raise CurveNotFound(job=job, arm=arm, metric=metric)
    return load_curves(session, [curve_id]).drop("curve_id")

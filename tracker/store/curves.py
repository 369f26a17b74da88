"""Reading curve points back as polars frames (NULL points are NaN, see tracker.models)."""

from __future__ import annotations

import numpy as np
import polars as pl
from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.domain import LOSS
from tracker.errors import CurveNotFound, RunNotFound, known_names
from tracker.models import Curve, Job, Point, Run
from tracker.store.catalog import get_job


def load_curves(
    session: Session, curve_ids: list[int], steps: tuple[int, int] | None = None
) -> pl.DataFrame:
    """Points of many curves: ``curve_id``, ``step``, ``value``, ordered by both; with
    ``steps`` only those from the first to the last step given (both included), read
    through the (curve_id, step) key.

    Rows come straight from the driver's cursor, one curve per query (two columns, not three)
    and go to polars through one numpy array: building ORM rows, or polars frames from
    Python rows, for a million points would cost more than the query itself. Steps are exact
    in a float64 (below 2**53); a NULL value (NaN, see tracker.models) becomes NaN.
    """
    schema = {"curve_id": pl.Int64, "step": pl.Int64, "value": pl.Float64}
    connection = session.connection()
    parts = []
    for curve_id in sorted(curve_ids):
        query = select(Point.step, Point.value).where(Point.curve_id == curve_id)
        if steps is not None:
            query = query.where(Point.step.between(*steps))
        rows = connection.execute(query.order_by(Point.step)).cursor.fetchall()
        points = np.array(rows, dtype=np.float64).reshape(-1, 2)
        parts.append(
            pl.DataFrame(
                {
                    "curve_id": np.full(len(points), curve_id, dtype=np.int64),
                    "step": points[:, 0].astype(np.int64),
                    "value": points[:, 1],
                },
                schema=schema,
            )
        )
    return pl.concat(parts) if parts else pl.DataFrame(schema=schema)


def find_curve(session: Session, job: str, arm: str, metric: str = LOSS) -> Curve:
    """One arm's curve row (its summary, no points)."""
    curve = session.scalar(
        select(Curve)
        .join(Run, Run.id == Curve.run_id)
        .join(Job, Job.id == Run.job_id)
        .where(Job.name == job, Run.arm == arm, Curve.metric == metric)
    )
    if curve is None:
        raise _no_curve(session, job, arm, metric)
    return curve


def _no_curve(session: Session, job: str, arm: str, metric: str) -> Exception:
    """Why a curve is not there, naming what is: the job, its arms or the arm's metrics."""
    runs = dict(
        session.execute(select(Run.arm, Run.id).where(Run.job_id == get_job(session, job).id)).all()
    )
    if arm not in runs:
        return RunNotFound(job=job, arm=arm, known=known_names(runs, near=arm))
    metrics = session.scalars(select(Curve.metric).where(Curve.run_id == runs[arm]))
    return CurveNotFound(job=job, arm=arm, metric=metric, known=known_names(metrics, near=metric))

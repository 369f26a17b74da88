"""What the tests count and sum: rows per table, and the points the chunks hold, decoded."""

from __future__ import annotations

from typing import Any

import polars as pl
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tracker.models import Curve, Job, Run
from tracker.store.curves import load_curves


def stored_points(session: Session) -> pl.DataFrame:
    """Every stored point: ``job``, ``curve_id``, ``step``, ``value``, decoded from its chunk."""
    owners = session.execute(
        select(Curve.id, Job.name).join(Run, Run.id == Curve.run_id).join(Job, Job.id == Run.job_id)
    ).all()
    jobs = pl.DataFrame(
        {"curve_id": [c for c, _ in owners], "job": [j for _, j in owners]},
        schema={"curve_id": pl.Int64, "job": pl.String},
    )
    return load_curves(session, list(jobs["curve_id"])).join(jobs, on="curve_id")


def row_counts(session: Session, models: tuple[Any, ...]) -> dict[str, int]:
    """Rows per table of ``models``, and ``point``: the points their chunks hold."""
    counts = {
        model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
        for model in models
    }
    return {**counts, "point": stored_points(session).height}

"""The one module that reads curve points: chunks (``curve_chunk``) decoded into polars frames."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from tracker.domain import LOSS
from tracker.errors import CurveNotFound, RunNotFound, known_names
from tracker.models import Curve, CurveChunk, Job, Run
from tracker.store import codec
from tracker.store.catalog import get_job
from tracker.store.points import ChunkRow

SCHEMA = {"curve_id": pl.Int64, "step": pl.Int64, "value": pl.Float64}


def read_curve(
    session: Session, curve_id: int, steps: tuple[int, int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One curve's steps (int64) and values (float64), in step order; with ``steps`` only
    those from the first to the last step given (both included), decoding only the chunks
    that hold them (found through the (curve_id, first_step) key)."""
    query = select(CurveChunk.data).where(CurveChunk.curve_id == curve_id)
    if steps is not None:
        query = _overlapping(query, curve_id, steps)
    rows = session.connection().execute(query.order_by(CurveChunk.first_step))
    chunks = [codec.decode(data) for (data,) in rows]
    if not chunks:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    step = np.concatenate([chunk[0] for chunk in chunks])
    value = np.concatenate([chunk[1] for chunk in chunks])
    if steps is None:
        return step, value
    low = np.searchsorted(step, steps[0], side="left")
    high = np.searchsorted(step, steps[1], side="right")
    return step[low:high], value[low:high]


def arm_points(
    session: Session, job_id: int, metric: str = LOSS
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each arm's ``metric`` curve of a job, steps and values as ``read_curve`` gives them,
    by arm name: its chunks read in one query (an arm without points has empty arrays)."""
    query = (
        select(Run.arm, CurveChunk.data)
        .join(Curve, Curve.run_id == Run.id)
        .outerjoin(CurveChunk, CurveChunk.curve_id == Curve.id)
        .where(Run.job_id == job_id, Curve.metric == metric)
        .order_by(Run.arm, CurveChunk.first_step)
    )
    chunks: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for arm, data in session.connection().execute(query):
        chunks.setdefault(arm, []).extend([] if data is None else [codec.decode(data)])
    return {
        arm: (
            np.concatenate([step for step, _ in parts] or [np.empty(0, np.int64)]),
            np.concatenate([value for _, value in parts] or [np.empty(0, np.float64)]),
        )
        for arm, parts in chunks.items()
    }


def load_curves(
    session: Session, curve_ids: list[int], steps: tuple[int, int] | None = None
) -> pl.DataFrame:
    """Points of many curves: ``curve_id``, ``step``, ``value``, ordered by both (``steps``
    as for ``read_curve``)."""
    parts = []
    for curve_id in sorted(curve_ids):
        step, value = read_curve(session, curve_id, steps)
        if len(step):
            parts.append(
                pl.DataFrame(
                    {"curve_id": np.full(len(step), curve_id), "step": step, "value": value},
                    schema=SCHEMA,
                )
            )
    return pl.concat(parts) if parts else pl.DataFrame(schema=SCHEMA)


def _overlapping(query: Select[Any], curve_id: int, steps: tuple[int, int]) -> Select[Any]:
    """Only the chunks holding steps from ``steps[0]`` to ``steps[1]``: those that start
    inside it, and the one before it that may reach into it (the last to start at or
    before the first step), both bounds on the key."""
    before = (
        select(func.max(CurveChunk.first_step))
        .where(CurveChunk.curve_id == curve_id, CurveChunk.first_step <= steps[0])
        .scalar_subquery()
    )
    return query.where(
        CurveChunk.first_step <= steps[1],
        CurveChunk.first_step >= func.coalesce(before, steps[0]),
    )


def stored_chunks(session: Session, curve_id: int) -> list[ChunkRow]:
    """A curve's chunks as stored, still encoded: what a copy writes elsewhere unchanged."""
    query = (
        select(
            CurveChunk.first_step,
            CurveChunk.last_step,
            CurveChunk.n_points,
            CurveChunk.min_value,
            CurveChunk.max_value,
            CurveChunk.data,
        )
        .where(CurveChunk.curve_id == curve_id)
        .order_by(CurveChunk.first_step)
    )
    return [
        (first, last, n, low, high, bytes(data))
        for first, last, n, low, high, data in session.execute(query)
    ]


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

"""The one module that reads curve points: chunks (``curve_chunk``) decoded into polars frames.

Every chunk is checked as it is read: its checksum, then what its row says of it (point
count, first and last step) against what it decodes to; and every read checks the curve's
row (point count, first and last step) against its chunks' rows, so a missing chunk is found
by a read of any window. Any difference is ``DamagedCurve``, naming the job, arm, metric and
steps, never other numbers (nor a shorter curve)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVarTuple

import numpy as np
import polars as pl
from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from tracker.domain import LOSS
from tracker.errors import CurveNotFound, DamagedCurve, RunNotFound, known_names
from tracker.models import Curve, CurveChunk, Job, Run
from tracker.store import codec
from tracker.store.catalog import get_job
from tracker.store.points import ChunkRow
from tracker.store.raw_rows import job_groups, streamed_rows
from tracker.store.value_lists import among

Columns = TypeVarTuple("Columns")
Points = dict[str, tuple[np.ndarray, np.ndarray]]  # by arm: a curve's steps and values
SCHEMA = {"curve_id": pl.Int64, "step": pl.Int64, "value": pl.Float64}
CHUNKS_AT_ONCE = 8  # chunks fetched by one query of curve_chunks: 131,072 points at most
# a chunk's columns that checked_decode takes
CHECKED = (
    CurveChunk.data,
    CurveChunk.checksum,
    CurveChunk.n_points,
    CurveChunk.first_step,
    CurveChunk.last_step,
)


@dataclass(frozen=True)
class StoredCurve:
    """A curve's row as a read checks its chunks against it."""

    id: int
    job: str
    arm: str
    metric: str
    n_points: int
    first_step: int | None
    last_step: int | None

    @cached_property
    def seed(self) -> int:
        """What its chunks' checksums are seeded with: its id and place (``codec.curve_seed``)."""
        return codec.curve_seed(self.id, self.job, self.arm, self.metric)

    def damaged(self, first: int | None, last: int | None, reason: str) -> DamagedCurve:
        """The error naming this curve's steps ``first`` to ``last`` as damaged."""
        job, arm, metric = self.job, self.arm, self.metric
        return DamagedCurve(job=job, arm=arm, metric=metric, first=first, last=last, reason=reason)

    def check_held(self, held: int, first: int | None, last: int | None) -> None:
        """``DamagedCurve`` unless the chunks hold the points the row counts (a chunk lost, or
        the row altered, reads as neither a shorter nor a longer curve)."""
        if (held, first, last) != (self.n_points, self.first_step, self.last_step):
            raise self.damaged(
                self.first_step,
                self.last_step,
                f"its chunks hold {held} points, steps {first}-{last}; its row says "
                f"{self.n_points}, steps {self.first_step}-{self.last_step}",
            )


# built once, as every read runs it (tracker.store.catalog says why)
_STORED = (
    select(Job.name, Run.arm, Curve.metric, Curve.n_points, Curve.first_step, Curve.last_step)
    .add_columns(
        func.coalesce(func.sum(CurveChunk.n_points), 0),
        func.min(CurveChunk.first_step),
        func.max(CurveChunk.last_step),
    )
    .join(Run, Run.id == Curve.run_id)
    .join(Job, Job.id == Run.job_id)
    .outerjoin(CurveChunk, CurveChunk.curve_id == Curve.id)
    .where(Curve.id == bindparam("curve_id"))
    .group_by(Curve.id, Run.id, Job.id)
)


def stored_curve(session: Session, curve_id: int) -> StoredCurve:
    """A curve's row, once its chunks' rows (not their data) are found to hold its points."""
    job, arm, metric, n, first, last, held, low, high = session.execute(
        _STORED, {"curve_id": curve_id}
    ).one()
    curve = StoredCurve(curve_id, job, arm, metric, n, first, last)
    curve.check_held(held, low, high)
    return curve


def read_curve(
    session: Session, curve_id: int, steps: tuple[int, int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One curve's steps (int64) and values (float64), in step order; with ``steps`` only
    those from the first to the last step given (both included), decoding only the chunks
    that hold them (found through the (curve_id, first_step) key)."""
    curve = stored_curve(session, curve_id)
    query = select(*CHECKED).where(CurveChunk.curve_id == curve_id)
    if steps is not None:
        query = _overlapping(query, curve_id, steps)
    rows = session.connection().execute(query.order_by(CurveChunk.first_step)).all()
    # each chunk decoded into its place in one array (its row's count of points): none joined
    # a count below 0 is a damaged row, for checked_decode to name: np.empty must not fail first
    total = max(sum(row[2] for row in rows), 0)
    step, value = np.empty(total, np.int64), np.empty(total, np.float64)
    at = 0
    for row in rows:
        checked_decode(curve, *row, into=(step[at : at + row[2]], value[at : at + row[2]]))
        at += row[2]
    if steps is None:
        return step, value
    low = np.searchsorted(step, steps[0], side="left")
    high = np.searchsorted(step, steps[1], side="right")
    return step[low:high], value[low:high]


def curve_chunks(
    session: Session, curve_id: int, steps: tuple[int, int] | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The chunks ``read_curve`` reads, one at a time, fetched ``CHUNKS_AT_ONCE`` at a time
    and each decoded only when asked for: a long curve read through them is never whole in
    memory, not even encoded."""
    curve = stored_curve(session, curve_id)
    keys = select(CurveChunk.first_step).where(CurveChunk.curve_id == curve_id)
    if steps is not None:
        keys = _overlapping(keys, curve_id, steps)
    connection = session.connection()
    firsts = connection.scalars(keys.order_by(CurveChunk.first_step)).all()
    for at in range(0, len(firsts), CHUNKS_AT_ONCE):
        batch = firsts[at : at + CHUNKS_AT_ONCE]
        rows = connection.execute(
            select(*CHECKED)
            .where(
                CurveChunk.curve_id == curve_id, CurveChunk.first_step.between(batch[0], batch[-1])
            )
            .order_by(CurveChunk.first_step)
        ).all()
        for row in rows:
            yield checked_decode(curve, *row)


# a job's curves' chunks by arm; built once, as every job page runs it (tracker.store.catalog
# says why)
_CHUNKS_BY_ARM = (
    select(Run.arm, Curve.id, Job.name, Curve.n_points, Curve.first_step, Curve.last_step)
    .add_columns(*CHECKED)
    .join(Job, Job.id == Run.job_id)
    .join(Curve, Curve.run_id == Run.id)
    .outerjoin(CurveChunk, CurveChunk.curve_id == Curve.id)
    .where(Curve.metric == bindparam("metric"))
)
_ARM_CHUNKS = _CHUNKS_BY_ARM.where(Run.job_id == bindparam("job_id")).order_by(
    Run.arm, CurveChunk.first_step
)
# the same of the listed jobs of at most ``at_most`` points of the metric, in job order, each
# row with its job's id last
_SMALL_JOBS = (
    select(Run.job_id)
    .join(Curve, Curve.run_id == Run.id)
    .where(among(Run.job_id, "job_ids"), Curve.metric == bindparam("metric"))
    .group_by(Run.job_id)
    .having(func.sum(Curve.n_points) <= bindparam("at_most"))
)
_JOB_ARM_CHUNKS = (
    _CHUNKS_BY_ARM.add_columns(Run.job_id)
    .where(Run.job_id.in_(_SMALL_JOBS))
    .order_by(Run.job_id, Run.arm, CurveChunk.first_step)
)


def arm_points(session: Session, job_id: int, metric: str = LOSS) -> Points:
    """Each arm's ``metric`` curve of a job, steps and values as ``read_curve`` gives them,
    by arm name: its chunks read in one query (an arm without points has empty arrays)."""
    rows = session.connection().execute(_ARM_CHUNKS, {"job_id": job_id, "metric": metric})
    return _arm_points(rows, metric)


def arm_points_by_job(
    session: Session, job_ids: list[int], at_most: int, metric: str = LOSS
) -> Iterator[tuple[int, Points]]:
    """``arm_points`` of each listed job of at most ``at_most`` points of ``metric`` (all
    arms), a job at a time in job id order: one statement whatever the number of jobs, its
    chunks streamed, so that one job's points are held at a time."""
    parameters = {"job_ids": job_ids, "metric": metric, "at_most": at_most}
    rows = streamed_rows(session, _JOB_ARM_CHUNKS, parameters, driver=True, blobs=True)
    for job_id, own in job_groups(rows, -1):
        yield job_id, _arm_points(own, metric)


def _arm_points(rows: Iterable[Any], metric: str) -> Points:
    """A job's ``_ARM_CHUNKS`` rows (with anything after their columns) decoded, by arm."""
    chunks: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    curves: dict[str, StoredCurve] = {}
    for arm, curve_id, job, n_points, first_step, last_step, *chunk in rows:
        curve = curves.get(arm) or StoredCurve(
            curve_id, job, arm, metric, n_points, first_step, last_step
        )
        curves[arm] = curve
        own = chunks.setdefault(arm, [])
        if chunk[0] is not None:  # a curve without points has no chunk (the outer join's row)
            own.append(checked_decode(curve, *chunk[: len(CHECKED)]))
    points = {}
    for arm, parts in chunks.items():
        steps = np.concatenate([step for step, _ in parts] or [np.empty(0, np.int64)])
        values = np.concatenate([value for _, value in parts] or [np.empty(0, np.float64)])
        ends = (int(steps[0]), int(steps[-1])) if len(steps) else (None, None)
        curves[arm].check_held(len(steps), *ends)
        points[arm] = (steps, values)
    return points


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


def _overlapping(
    query: Select[*Columns], curve_id: int, steps: tuple[int, int]
) -> Select[*Columns]:
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


def checked_decode(
    curve: StoredCurve,
    data: bytes,
    checksum: int,
    n: int,
    first: int,
    last: int,
    into: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A chunk of ``curve``: its ``(steps, values)``, once it is checked against its row
    (written in ``into``, as ``codec.decode`` does)."""
    try:
        if codec.checksum(data, curve.seed) != checksum:
            raise codec.BadChunk("checksum mismatch")
        steps, values = codec.decode(data, into)
        if len(steps) != n or steps[0] != first or steps[-1] != last:
            raise codec.BadChunk("its points differ from its row")
        if len(steps) > 1 and not (steps[1:] > steps[:-1]).all():  # no gap overflows
            raise codec.BadChunk("its steps are out of order")
    except codec.BadChunk as exc:
        raise curve.damaged(first, last, str(exc)) from None
    return steps, values


def stored_chunks(session: Session, curve_id: int) -> list[ChunkRow]:
    """A curve's chunks as stored, still encoded, each checked first: what a copy writes
    elsewhere unchanged (and ``tracker db check`` verifies)."""
    curve = stored_curve(session, curve_id)
    query = (
        select(CurveChunk.min_value, CurveChunk.max_value, *CHECKED)
        .where(CurveChunk.curve_id == curve_id)
        .order_by(CurveChunk.first_step)
    )
    rows = []
    for low, high, data, checksum, n, first, last in session.execute(query):
        checked_decode(curve, bytes(data), checksum, n, first, last)
        rows.append((first, last, n, low, high, bytes(data)))
    return rows


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

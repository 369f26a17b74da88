"""Loading one job's data (``tracker.domain.JobData``: polars frames) from the database."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
from sqlalchemy import Text, bindparam, select, type_coerce
from sqlalchemy.orm import Session

from tracker.domain import LOSS, JobData
from tracker.models import Curve, Probe, Run, stored_document
from tracker.store.catalog import PROBE_NUMBERS, get_job
from tracker.store.curves import load_curves
from tracker.store.frames import query_frame, rows_frame
from tracker.store.raw_rows import job_groups, streamed_rows
from tracker.store.run_rows import checked_runs
from tracker.store.value_lists import among

PROBE_COLUMNS = ("model", "variant", *PROBE_NUMBERS, "error", "extra")
RUN_ORDER = (Run.variant, Run.seed)  # a job's arms, as its runs frame lists them
RUN_COLUMNS = ("arm", "model", "variant", "seed", "val_loss", "final_loss", "diverged", "extra")


# built once, as every job page runs it (tracker.store.catalog says why)
_PROBES = (
    select(*(getattr(Probe, c) for c in PROBE_COLUMNS))
    .where(Probe.job_id == bindparam("job_id"))
    .order_by(Probe.id)
)


# the same of many jobs in job order, each row with its job's id last and its ``extra`` as the
# text stored (the driver's own rows: ``streamed_rows``)
_JOB_PROBES = (
    select(*(getattr(Probe, c) for c in PROBE_COLUMNS[:-1]))
    .add_columns(type_coerce(Probe.extra, Text), Probe.job_id)
    .where(among(Probe.job_id, "job_ids"))
    .order_by(Probe.job_id, Probe.id)
)


def load_probes(session: Session, job_id: int) -> pl.DataFrame:
    """A job's probes: ``PROBE_COLUMNS`` in the order its files listed them."""
    return query_frame(session, _PROBES, {"job_id": job_id})


NO_PROBES = rows_frame(_PROBES, [])  # ``load_probes`` of a job without any


def probes_by_job(session: Session, job_ids: list[int]) -> Iterator[tuple[int, pl.DataFrame]]:
    """``load_probes`` of each listed job that has probes, a job at a time in job id order:
    one statement whatever the number of jobs, its rows streamed."""
    rows = streamed_rows(session, _JOB_PROBES, {"job_ids": job_ids})
    for job_id, own in job_groups(rows, -1):
        documents = [(*row[:-2], stored_document(row[-2])) for row in own]
        yield job_id, rows_frame(_PROBES, documents)


def load_job_data(
    session: Session,
    job_name: str,
    metric: str = LOSS,
    curves: dict[str, pl.DataFrame] | None = None,
) -> JobData:
    """Probes, runs and one metric's curves of a job. ``extra`` columns hold dicts.
    ``curves`` given (by an ingest that has them at hand): no point is read."""
    job = get_job(session, job_name)
    probes = load_probes(session, job.id)
    run_rows = query_frame(
        session,
        select(*(getattr(Run, c) for c in RUN_COLUMNS), Run.id)
        .where(Run.job_id == job.id)
        .order_by(*RUN_ORDER),
    )
    runs = run_rows.drop("id")
    meta = {item.key: item.value for item in job.meta}
    if curves is not None:
        return JobData(job.name, meta, probes, runs, curves)
    checked_runs(session, [job.id])  # the rows read from the store, not those just written
    arm_of_run = dict(zip(run_rows["id"], run_rows["arm"], strict=True))
    curve_rows = session.execute(
        select(Curve.id, Curve.run_id).where(Curve.run_id.in_(arm_of_run), Curve.metric == metric)
    ).all()
    points = load_curves(session, [curve_id for curve_id, _ in curve_rows])
    by_curve = {
        key[0]: part.drop("curve_id")
        for key, part in points.partition_by("curve_id", as_dict=True, maintain_order=True).items()
    }
    empty = pl.DataFrame(schema={"step": pl.Int64, "value": pl.Float64})
    loaded = {arm_of_run[run_id]: by_curve.get(curve_id, empty) for curve_id, run_id in curve_rows}
    return JobData(job.name, meta, probes, runs, loaded)

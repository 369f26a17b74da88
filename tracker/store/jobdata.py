"""Loading one job's data (``tracker.domain.JobData``: polars frames) from the database."""

from __future__ import annotations

import polars as pl
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from tracker.domain import LOSS, JobData
from tracker.models import Curve, Probe, Run
from tracker.store.catalog import PROBE_NUMBERS, get_job
from tracker.store.curves import load_curves
from tracker.store.frames import query_frame
from tracker.store.run_rows import checked_runs

PROBE_COLUMNS = ("model", "variant", *PROBE_NUMBERS, "error", "extra")
RUN_ORDER = (Run.variant, Run.seed)  # a job's arms, as its runs frame lists them
RUN_COLUMNS = ("arm", "model", "variant", "seed", "val_loss", "final_loss", "diverged", "extra")


# built once, as every job page runs it (tracker.store.catalog says why)
_PROBES = (
    select(*(getattr(Probe, c) for c in PROBE_COLUMNS))
    .where(Probe.job_id == bindparam("job_id"))
    .order_by(Probe.id)
)


def load_probes(session: Session, job_id: int) -> pl.DataFrame:
    """A job's probes: ``PROBE_COLUMNS`` in the order its files listed them."""
    return query_frame(session, _PROBES, {"job_id": job_id})


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

"""``tracker export``: every point of the selected jobs as a Parquet dataset, for SQL engines.

The points themselves are compressed chunks that only the tracker reads; this writes them out
as plain rows that DuckDB, polars or Spark read directly (also from object storage): one file
per job, ``DIR/job=NAME/curves.parquet`` (hive partitioning: the job is the folder), with the
columns ``arm``, ``model``, ``variant``, ``seed``, ``metric``, ``step``, ``value``, ``study``
(the job's, whose expectations judge it) and one column per metadata key of any selected job
(null where a job lacks it), so every file has the same schema: text, but for ``time``, a
timestamp (UTC) that engines compare as one. A job's file is written whole or not at all (a
temporary file renamed), one job in memory at a time: a full disk or an interrupt removes the
temporary file and names the jobs written before it.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.errors import ExportFailed, Interrupted
from tracker.models import Curve, Job, Run
from tracker.queries.selection import JobSelection, job_meta, selected_jobs
from tracker.signal_note import interrupted
from tracker.store.curves import load_curves
from tracker.store.run_rows import checked_runs

FILE_NAME = "curves.parquet"
POINT_COLUMNS = ("arm", "model", "variant", "seed", "metric", "step", "value")
STUDY = "study"
TIME_KEY = "time"  # the metadata that orders jobs: a timestamp in the files


def meta_column(key: str) -> str:
    """A metadata key's column: the key, or ``meta.KEY`` where it would take a point column's
    name (as ``/api/runs`` names such keys)."""
    return f"meta.{key}" if key in (*POINT_COLUMNS, STUDY, "job") else key


def job_points(
    session: Session, job_id: int, meta: dict[str, str | None]
) -> tuple[pl.DataFrame, int]:
    """Every point of one job: ``arm``, ``metric``, ``step``, ``value``, the job's ``study``
    and the ``meta`` columns, by arm, metric and step; and how many curves the job has."""
    study = session.scalar(select(Job.study).where(Job.id == job_id))
    curves = session.execute(
        select(Curve.id, Run.arm, Run.model, Run.variant, Run.seed, Curve.metric)
        .join(Run, Run.id == Curve.run_id)
        .where(Run.job_id == job_id)
        .order_by(Run.arm, Curve.metric)
    ).all()
    names = pl.DataFrame(
        [tuple(curve) for curve in curves],
        schema={
            "curve_id": pl.Int64,
            "arm": pl.String,
            "model": pl.String,
            "variant": pl.String,
            "seed": pl.Int64,
            "metric": pl.String,
        },
        orient="row",
    )
    points = load_curves(session, [curve[0] for curve in curves])
    frame = (
        names.join(points, on="curve_id", maintain_order="left")
        .select(*POINT_COLUMNS, pl.lit(study, pl.String).alias(STUDY))
        .with_columns(_meta_value(key, v).alias(meta_column(key)) for key, v in meta.items())
    )
    return frame, len(curves)


def _meta_value(key: str, value: str | None) -> pl.Expr:
    text = pl.lit(value, pl.String)
    if key != TIME_KEY:
        return text
    return text.str.to_datetime("%Y-%m-%dT%H:%M:%SZ", time_unit="us", time_zone="UTC")


def export_curves(session: Session, selection: JobSelection, directory: Path) -> pl.DataFrame:
    """Write the points of the selected jobs under ``directory`` (see the module docstring);
    one row per job written: ``job``, ``curves``, ``points``, ``path`` (of its file)."""
    jobs = selected_jobs(session, selection)
    job_ids = jobs["job_id"].to_list()
    checked_runs(session, job_ids)  # what labels their points, before any file is written
    meta = job_meta(session, job_ids)
    keys = sorted({key for own in meta.values() for key in own})
    done: list[dict[str, object]] = []
    for job_id, name in zip(job_ids, jobs["job"], strict=True):
        own = meta.get(job_id, {})
        folder = directory / f"job={name}"
        partial = folder / f".{FILE_NAME}.tmp"
        written = _written([str(row["job"]) for row in done])
        try:  # an interrupt while the job is read says what was written too
            frame, curves = job_points(session, job_id, {key: own.get(key) for key in keys})
            folder.mkdir(parents=True, exist_ok=True)
            frame.write_parquet(partial, compression="zstd", statistics=True)
            os.replace(partial, folder / FILE_NAME)
        except BaseException as exc:
            partial.unlink(missing_ok=True)
            if interrupted(exc):
                raise Interrupted(f"{written}; job {name} and those after it not written") from None
            if not isinstance(exc, (OSError, pl.exceptions.PolarsError)):  # a full disk, mostly
                raise
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ExportFailed(
                directory=directory, job=name, reason=reason, written=written
            ) from None
        path = str(folder / FILE_NAME)
        done.append({"job": name, "curves": curves, "points": frame.height, "path": path})
    schema = {"job": pl.String, "curves": pl.Int64, "points": pl.Int64, "path": pl.String}
    return pl.DataFrame(done, schema=schema)


def _written(jobs: list[str]) -> str:
    return f"written before it: {', '.join(jobs)}" if jobs else "no job was written"

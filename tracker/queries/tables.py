"""Cross-job tables as polars frames. Probes, runs and trends read summary rows only; curve
points are read only by ``curve``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from sqlalchemy import and_, case, distinct, func, select
from sqlalchemy.orm import Session

from tracker.analysis.smoothing import smooth
from tracker.domain import LOSS
from tracker.errors import UnknownArm, UnknownMetric, did_you_mean, known_names
from tracker.models import Curve, Job, Probe, Run
from tracker.queries.job_analysis import study_judging
from tracker.queries.run_indexes import run_indexes
from tracker.queries.selection import JobSelection, selected_jobs
from tracker.queries.window import check_window, kept, read_window
from tracker.store.catalog import PROBE_NUMBERS
from tracker.store.frames import query_frame, streamed_frame
from tracker.store.run_rows import checked_runs
from tracker.store.runfilter import matching_runs, run_conditions
from tracker.store.value_lists import among

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

PROBE_METRICS = (*PROBE_NUMBERS, "peak_bpp")
RUN_ID = "#run"
RUN_METRICS = ("val_loss", "final_loss", "min_loss", "last_loss", "steps")


def _filtered(query: Any, entity: Any, selection: JobSelection, job_ids: list[int]) -> Any:
    query = query.where(among(entity.job_id, job_ids))
    if selection.models:
        query = query.where(entity.model.in_(selection.models))
    if selection.variants:
        query = query.where(entity.variant.in_(selection.variants))
    return query


def with_jobs(jobs: pl.DataFrame, frame: pl.DataFrame) -> pl.DataFrame:
    """Attach job name, time (a UTC datetime) and group columns, in job order (each job's rows
    in their order in ``frame``)."""
    return jobs.join(frame, on="job_id", how="inner", maintain_order="left_right").drop("job_id")


def probes(
    session: Session,
    selection: JobSelection,
    *,
    failed: bool = False,
    jobs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per (job, model, variant) with bytes/param, parameter count and peak memory.
    ``jobs``: ``selected_jobs(session, selection)``, when the caller has it already."""
    jobs = selected_jobs(session, selection) if jobs is None else jobs
    query = _filtered(
        select(
            Probe.job_id,
            Probe.model,
            Probe.variant,
            *(getattr(Probe, column) for column in PROBE_NUMBERS),
            Probe.error,
        ).order_by(Probe.id),
        Probe,
        selection,
        jobs["job_id"].to_list(),
    )
    if failed:
        query = query.where(Probe.n_params.is_(None))
    frame = streamed_frame(session, query).with_columns(
        peak_bpp=pl.col("peak_steady") / pl.col("n_params")
    )
    return with_jobs(jobs, frame).select(
        "job", "time", *selection.group_by, "model", "variant", *PROBE_METRICS, "error"
    )


def probe_models(session: Session, job_ids: list[int], prefix: str) -> tuple[pl.DataFrame, int]:
    """Per model named ``prefix...`` among the jobs' probes (in the order of their first
    probe): its ``size`` (most parameters), its probes ``measured`` and ``failed``, and the
    ``jobs`` it was measured in; and how many jobs probed such a model. Counted in SQL: the
    bytes/param figure draws one model, and reads that one's probes alone."""
    named = func.substr(Probe.model, 1, len(prefix)) == prefix  # LIKE ignores case in SQLite
    scaling = [among(Probe.job_id, job_ids), named]
    measured = func.count(Probe.n_params)
    query = (
        select(
            Probe.model,
            func.max(Probe.n_params).label("size"),
            measured.label("measured"),
            (func.count() - measured).label("failed"),
            func.count(distinct(case((Probe.n_params.is_not(None), Probe.job_id)))).label("jobs"),
        )
        .where(*scaling)
        .group_by(Probe.model)
        .order_by(func.min(Probe.id))
    )
    jobs = session.scalar(select(func.count(distinct(Probe.job_id))).where(*scaling)) or 0
    return query_frame(session, query), jobs


ARM_SCHEMA = {
    "job_id": pl.Int64,
    "arm": pl.String,
    "model": pl.String,
    "variant": pl.String,
    "seed": pl.Int64,
    "steps": pl.Int64,
    "last_step": pl.Int64,
    "final_loss": pl.Float64,
    "min_loss": pl.Float64,
    "last_loss": pl.Float64,
    "nonfinite": pl.Int64,
    "val_loss": pl.Float64,
    "diverged": pl.Boolean,
    "stopped": pl.String,
    "notes": pl.String,
}


def arm_rows(session: Session, selection: JobSelection, job_ids: list[int]) -> pl.DataFrame:
    """One row per arm of the jobs ``job_ids`` (``job_id`` first) that the selection's models,
    variants and conditions on runs keep: its summary and its loss curve's (steps: how many
    it logged; last_step; nonfinite: its NaN and infinite points), and its notes in one line.
    Made of each job's run index (``run_indexes``: kept, or made from its checked rows), each
    job's arms by variant, seed and arm."""
    on_runs = run_conditions(selection.where)
    runs = run_indexes(session, job_ids)
    if on_runs:
        runs = runs.filter(pl.col("id").is_in(list(matching_runs(session, job_ids, on_runs))))
    if selection.models:
        runs = runs.filter(pl.col("model").is_in(selection.models))
    if selection.variants:
        runs = runs.filter(pl.col("variant").is_in(selection.variants))
    # the index's ``steps`` is the claims' length; the table's is the loss curve's count
    return runs.select(pl.col("points").alias("steps") if c == "steps" else c for c in ARM_SCHEMA)


def arm_table(
    session: Session, selection: JobSelection, jobs: pl.DataFrame | None = None
) -> pl.DataFrame:
    """``arm_rows`` of the selected jobs with their name, time and group columns, in job
    order. ``jobs`` as for ``probes``."""
    jobs = selected_jobs(session, selection) if jobs is None else jobs
    return with_jobs(jobs, arm_rows(session, selection, jobs["job_id"].to_list()))


def seeds(
    session: Session, selection: JobSelection, *, jobs: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One row per (job, model, variant) with the mean, standard deviation and count over
    seeds. Grouped by metadata keys, the seeds of all jobs sharing the keys' values are
    pooled: one row per (values, model, variant), with the number of jobs pooled. ``jobs``
    as for ``probes``. (One row per arm: ``tracker.queries.runs.run_table``.)"""
    table = arm_table(session, selection, jobs)
    keys = ["job", "time", *selection.group_by, "model", "variant"]
    metrics = ("val_loss", "final_loss", "min_loss")
    pooled = []
    if selection.group_by:
        keys = [*selection.group_by, "model", "variant"]
        pooled = [pl.col("job").n_unique().alias("jobs")]
    return table.group_by(keys, maintain_order=True).agg(
        *pooled,
        pl.len().alias("seeds"),
        *(pl.col(m).mean().alias(f"{m}_mean") for m in metrics),
        *(pl.col(m).std().alias(f"{m}_std") for m in metrics),
        pl.col("diverged").any().alias("any_diverged"),
    )


def trend(
    session: Session, selection: JobSelection, metric: str, exp: Expectations
) -> pl.DataFrame:
    """One figure of merit across jobs in job order, with the change from the previous job.

    A probe field gives one series per (model, variant); a run field one per (model, variant)
    with seeds aggregated (mean, std, count). ``expected``, ``tolerance_lower`` and
    ``tolerance_upper``: what the job's study (``exp.judging``) checks the value against and
    the band it allows (``Expectations.target``), null where it checks none.
    """
    series = ["model", "variant"]  # grouping adds columns; the change stays job to job
    if metric in PROBE_METRICS:
        table = probes(session, selection).filter(pl.col("n_params").is_not_null())
        table = table.select(
            "job",
            "time",
            *selection.group_by,
            *series,
            pl.col(metric).cast(pl.Float64).alias("value"),
        )
    elif metric in RUN_METRICS:
        table = (
            arm_table(session, selection)
            .group_by(["job", "time", *selection.group_by, *series], maintain_order=True)
            .agg(
                pl.col(metric).cast(pl.Float64).mean().alias("value"),
                pl.col(metric).cast(pl.Float64).std().alias("std"),
                pl.len().alias("seeds"),
            )
        )
    else:
        metrics = (*PROBE_METRICS, *RUN_METRICS)  # in their order, not sorted
        raise UnknownMetric(metric=metric, known=", ".join(metrics) + did_you_mean(metric, metrics))
    return _with_targets(
        session, table.with_columns(change=pl.col("value").diff().over(series)), metric, exp
    )


def _with_targets(
    session: Session, table: pl.DataFrame, metric: str, exp: Expectations
) -> pl.DataFrame:
    names = table.get_column("job").unique().to_list()
    studies = dict(session.execute(select(Job.name, Job.study).where(among(Job.name, names))).all())
    judged = {study: study_judging(session, exp, study) for study in set(studies.values())}
    targets = [
        judged[studies[job]].target(metric, variant)
        for job, variant in table.select("job", "variant").iter_rows()
    ]
    return table.with_columns(
        pl.Series("expected", [None if t is None else t[0] for t in targets], pl.Float64),
        pl.Series("tolerance_lower", [None if t is None else t[0] - t[1] for t in targets]),
        pl.Series("tolerance_upper", [None if t is None else t[0] + t[1] for t in targets]),
    )


def curve(
    session: Session,
    selection: JobSelection,
    arms: tuple[str, ...],
    *,
    metric: str = LOSS,
    ema_alpha: float | None = None,
    every: int = 1,
    window: tuple[int | None, int | None] = (None, None),
    points: int | None = None,
) -> pl.DataFrame:
    """Points of the chosen arms of the chosen jobs: ``job``, ``arm``, ``step``, ``value``
    (and ``ema``: ``smooth``, per step, NaN at a non-finite value and resuming after it,
    debiased, computed over the full series before thinning to every N-th point; the last
    point is always kept, so a thinned curve still ends where the run ended).

    ``window``: only the steps from its first to its last (None: the curve's own), read
    from the chunks that hold them (with ``ema_alpha``, from the curve's first step: the
    EMA needs every point before); ``points``: each curve min/max-downsampled to at most
    that many, as ``/api/curve`` does (``tracker.queries.window``)."""
    check_window(*window, points)
    jobs = selected_jobs(session, selection)
    job_ids = jobs["job_id"].to_list()
    known_arms = set(session.scalars(select(Run.arm).distinct().where(among(Run.job_id, job_ids))))
    for arm in arms:
        if arm not in known_arms:
            raise UnknownArm(name=arm, known=known_names(known_arms, near=arm))
    metrics = select(Curve.metric).distinct().join(Run, Run.id == Curve.run_id)
    metrics = metrics.where(among(Run.job_id, job_ids))
    known_metrics = set(session.scalars(metrics.where(Run.arm.in_(arms)) if arms else metrics))
    if metric not in known_metrics:
        raise UnknownMetric(metric=metric, known=known_names(known_metrics, near=metric))
    query = _filtered(
        select(Run.job_id, Run.arm, Curve.id)
        .join(Curve, and_(Curve.run_id == Run.id, Curve.metric == metric))
        .order_by(Run.arm),
        Run,
        selection,
        job_ids,
    )
    if arms:
        query = query.where(Run.arm.in_(arms))
    found = with_jobs(jobs, query_frame(session, query).rename({"id": "curve_id"})).drop("time")
    labels = found.drop("curve_id")
    columns = {"step": pl.Int64, "value": pl.Float64}
    if ema_alpha is not None:
        columns["ema"] = pl.Float64
    chosen = select(Curve).where(among(Curve.id, found["curve_id"].to_list()))
    curves = {c.id: c for c in session.scalars(chosen)}
    parts = []
    # one curve at a time, its points labelled by literal columns: no join of every point
    for label, curve_id in zip(labels.iter_rows(), found["curve_id"], strict=True):
        read = _curve_points(session, curves[curve_id], ema_alpha, window, points)
        if not len(read["step"]):
            continue
        if every > 1:
            n = len(read["step"])
            keep = np.unique(np.append(np.arange(0, n, every), n - 1))
            read = {name: array[keep] for name, array in read.items()}
        frame = pl.DataFrame(read, schema=columns)
        parts.append(
            frame.select(
                *(
                    pl.lit(v, dtype).alias(name)
                    for (name, dtype), v in zip(labels.schema.items(), label, strict=True)
                ),
                pl.all(),
            )
        )
    empty = pl.DataFrame(schema={**labels.schema, **columns})
    # the rows read checked after the points: a damaged curve is named by its own line, more
    # precise than its run's (the points check themselves against their row)
    checked_runs(session, job_ids)
    return pl.concat(parts) if parts else empty


def _curve_points(
    session: Session,
    curve: Curve,
    ema_alpha: float | None,
    window: tuple[int | None, int | None],
    points: int | None,
) -> dict[str, np.ndarray]:
    """One curve's ``step`` and ``value`` in ``window`` (and its ``ema``), at most ``points``."""
    if ema_alpha is None:
        read = read_window(session, curve, *window, points)
        return {"step": read.step, "value": read.value}
    whole = read_window(session, curve, None, window[1], None)
    ema = smooth(whole.step, whole.value, ema_alpha)
    inside = np.flatnonzero(whole.step >= (window[0] if window[0] is not None else -np.inf))
    keep = inside[kept(whole.value[inside], points)]
    return {"step": whole.step[keep], "value": whole.value[keep], "ema": ema[keep]}

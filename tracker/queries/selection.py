"""Which jobs a query looks at, in which order, and how they are grouped.

Job order: the ``time`` metadata value given at ingest (ISO 8601) when there is one, else the
ingest time. Metadata filters (``--where k=v``) and groupings (``--group-by k``) act on jobs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl
from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.conditions import Condition, as_conditions
from tracker.errors import (
    GroupKeyClash,
    NoJobSince,
    UnknownJob,
    UnknownValue,
    case_hint,
    did_you_mean,
    known_names,
)
from tracker.jsonio import format_time
from tracker.models import Job, JobMeta, Probe, Run
from tracker.store.catalog import (
    PROBE_NUMBERS,
    check_meta_keys,
    check_meta_values,
    job_time,
    meta_holds,
    parse_where,
)
from tracker.store.raw_rows import plain_rows
from tracker.store.runfilter import check_where, matching_runs, meta_conditions, run_conditions
from tracker.store.value_lists import among


@dataclass(frozen=True)
class JobSelection:
    """Which jobs and rows a query keeps: these jobs, models and variants (none: all), the
    jobs and runs satisfying ``where``, at or after ``since``, of ``study``; and the metadata
    keys it groups by (``group_by``). ``tracker.api`` takes it as it is, or its parts as
    keywords."""

    jobs: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    # conditions on metadata and on runs (tracker.store.runfilter); (key, value) pairs are "="
    where: tuple[Condition, ...] = ()
    group_by: tuple[str, ...] = field(default=())
    since: datetime | None = None  # only jobs whose time is at or after this one
    study: str | None = None  # only jobs of this study

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", as_conditions(self.where))

    @classmethod
    def from_filters(
        cls,
        job: Iterable[str] | None = None,
        model: Iterable[str] | None = None,
        variant: Iterable[str] | None = None,
        where: Iterable[str] | None = None,
        group_by: Iterable[str] | None = None,
    ) -> JobSelection:
        """The filters as users type them (``where`` as KEY=VALUE or KEY OP VALUE items, for the
        command line and the server); a ``ValueError`` names the operators."""
        return cls(
            jobs=tuple(job or ()),
            models=tuple(model or ()),
            variants=tuple(variant or ()),
            where=parse_where(where),
            group_by=tuple(group_by or ()),
        )


# Columns of the query tables: a metadata key of the same name cannot become a column.
TABLE_COLUMNS = frozenset(
    {
        "job_id",
        "job",
        "jobs",
        "time",
        "model",
        "variant",
        "arm",
        "seed",
        "step",
        "value",
        "ema",
        "std",
        "seeds",
        "change",
        "points",
        "error",
        *PROBE_NUMBERS,
        "peak_bpp",
        "val_loss",
        "final_loss",
        "min_loss",
        "last_loss",
        "diverged",
        "any_diverged",
        "nonfinite",
        "notes",
        "val_loss_mean",
        "final_loss_mean",
        "min_loss_mean",
        "val_loss_std",
        "final_loss_std",
        "min_loss_std",
    }
)


def _check_values(session: Session, selection: JobSelection) -> None:
    """A model, variant or metadata value that no job has is an error naming the known ones."""
    check_meta_values(session, meta_conditions(selection.where))
    for what, wanted, probe_column, run_column in (
        ("model", selection.models, Probe.model, Run.model),
        ("variant", selection.variants, Probe.variant, Run.variant),
    ):
        if not wanted:
            continue
        known = set(session.scalars(select(probe_column).distinct()))
        known |= set(session.scalars(select(run_column).distinct()))
        for value in wanted:
            if value not in known:
                hint = case_hint(value, known, f"{what} {{}}") or did_you_mean(value, known)
                raise UnknownValue(what=f"{what} {value}", known=known_names(known), hint=hint)


def _check_keys(session: Session, selection: JobSelection) -> None:
    for key in selection.group_by:
        if key in TABLE_COLUMNS:
            raise GroupKeyClash(key=key)
    check_where(session, selection.where)
    check_meta_keys(session, selection.group_by)


def selected_jobs(session: Session, selection: JobSelection) -> pl.DataFrame:
    """``job_id``, ``job``, ``time`` and one column per group-by key, in job order. A name,
    key or value no job has, or a ``since`` after every selected job, is an error."""
    _check_keys(session, selection)
    query = select(Job.id, Job.name, Job.ingested_at)
    if selection.study is not None:
        query = query.where(Job.study == selection.study)
    if selection.jobs:
        query = query.where(Job.name.in_(selection.jobs))
    jobs = session.execute(query).all()
    missing = sorted(set(selection.jobs) - {name for _, name, _ in jobs})
    if missing:
        known = known_names(session.scalars(select(Job.name)), near=missing[0])
        raise UnknownJob(name=missing[0], known=known)
    _check_values(session, selection)
    ids = [job_id for job_id, _, _ in jobs]
    meta = job_meta(session, ids)
    on_meta, on_runs = meta_conditions(selection.where), run_conditions(selection.where)
    with_runs = set(matching_runs(session, ids, on_runs).values()) if on_runs else set(ids)
    columns: dict[str, list[Any]] = {"job_id": [], "job": [], "time": []}
    columns.update((key, []) for key in selection.group_by)
    latest = None
    for job_id, name, ingested_at in jobs:
        own = meta.get(job_id, {})
        if job_id not in with_runs or not meta_holds(own, on_meta):
            continue
        time = job_time(own, ingested_at)
        if latest is None or time > latest[0]:
            latest = (time, name)
        if selection.since is not None and time < selection.since:
            continue
        columns["job_id"].append(job_id)
        columns["job"].append(name)
        columns["time"].append(time)
        for key in selection.group_by:
            columns[key].append(own.get(key))
    if selection.since is not None and not columns["job"] and latest is not None:
        since, last = format_time(selection.since), format_time(latest[0])
        raise NoJobSince(since=since, latest=last, job=latest[1])
    schema: dict[str, pl.DataType] = {
        "job_id": pl.Int64(),
        "job": pl.String(),
        "time": pl.Datetime("us", "UTC"),
        **{key: pl.String() for key in selection.group_by},
    }
    return pl.DataFrame(columns, schema=schema).sort("time", "job_id")


def contents_and_meta(
    session: Session, job_ids: Iterable[int]
) -> tuple[dict[int, str], dict[int, dict[str, str]]]:
    """Of each job: its content digest, and its metadata (a job without any has no entry)."""
    ids = list(job_ids)
    query = select(Job.id, Job.content_digest).where(among(Job.id, ids))
    digests = dict(session.execute(query).all())
    return digests, job_meta(session, ids)


def job_meta(session: Session, job_ids: list[int]) -> dict[int, dict[str, str]]:
    """Each job's metadata (a job without any has no entry)."""
    meta: dict[int, dict[str, str]] = {}
    query = select(JobMeta.job_id, JobMeta.key, JobMeta.value)
    for job_id, key, value in plain_rows(session, query.where(among(JobMeta.job_id, job_ids))):
        meta.setdefault(job_id, {})[key] = value
    return meta

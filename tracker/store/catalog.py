"""Listing, showing and deleting ingested jobs, their metadata and the time that orders them.
Reads summary rows only, never curve points."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, select, true
from sqlalchemy.orm import Session

from tracker.completeness import stopped_arms, summary_steps
from tracker.conditions import Condition, as_conditions, parse_condition
from tracker.domain import LOSS
from tracker.errors import (
    BadMetaValue,
    BadTime,
    MissingMetaKey,
    NoJobSince,
    UnknownJob,
    UnknownMetaKey,
    UnknownValue,
    case_hint,
    did_you_mean,
    known_names,
)
from tracker.jsonio import format_time
from tracker.models import Curve, Job, JobMeta, Probe, Run
from tracker.notes import notes_text
from tracker.store.raw_rows import plain_rows
from tracker.store.run_rows import checked_runs
from tracker.store.runfilter import check_where, matching_runs, meta_conditions, run_conditions
from tracker.store.value_lists import among

Row = dict[str, Any]
TIME_KEY = "time"  # metadata that orders jobs in queries, instead of the ingest time
# a probe's numbers, as its columns are named in every listing
PROBE_NUMBERS = (
    "n_params",
    "bpp_params",
    "bpp_state",
    "bpp_grads",
    "bpp_params_state_grads",
    "peak_steady",
)


def parse_time(value: str) -> datetime:
    """An ISO 8601 time; one without a zone is taken as UTC."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadTime(value=value) from None
    return as_utc(moment)


def checked_meta(meta: Mapping[str, str]) -> dict[str, str]:
    """Metadata as stored: printable values (as ``job.json``'s: no control, invisible or
    text-direction character), its ``time`` checked and written as every time is shown
    (``2026-11-28T10:00Z`` -> ``2026-11-28T10:00:00Z``)."""
    for key, value in meta.items():
        if not value.isprintable():
            unshown = next(ch for ch in value if not ch.isprintable())
            raise BadMetaValue(key=key, value=value, character=f"U+{ord(unshown):04X}")
    if TIME_KEY not in meta:
        return dict(meta)
    return {**meta, TIME_KEY: format_time(parse_time(meta[TIME_KEY]))}


def job_time(meta: Mapping[str, str], ingested_at: datetime) -> datetime:
    """When a job ran, for ordering: its ``time`` metadata, else when it was ingested."""
    return parse_time(meta[TIME_KEY]) if TIME_KEY in meta else as_utc(ingested_at)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands back stored times without their zone; they were written in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _meta(session: Session, job_ids: list[int]) -> dict[int, dict[str, str]]:
    meta: dict[int, dict[str, str]] = {}
    for job_id, key, value in session.execute(
        select(JobMeta.job_id, JobMeta.key, JobMeta.value)
        .where(among(JobMeta.job_id, job_ids))
        .order_by(JobMeta.job_id, JobMeta.key)
    ):
        meta.setdefault(job_id, {})[key] = value
    return meta


def job_studies(session: Session, job_ids: Iterable[int]) -> list[str]:
    """The studies of these jobs, by name."""
    query = select(Job.study).where(among(Job.id, job_ids)).distinct()
    return sorted(session.scalars(query))


def _probe_counts() -> Any:
    """Per job: its probes and those that failed (no parameter count)."""
    return select(
        Probe.job_id,
        func.count().label("probes"),
        (func.count() - func.count(Probe.n_params)).label("failed_probes"),
    ).group_by(Probe.job_id)


def job_counts(session: Session, job_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Each listed job's probes and arms (those ``list_jobs`` shows), in two statements
    whatever the number of jobs; a job without either has none of it."""

    def per_job(table: type[Probe] | type[Run]) -> dict[int, int]:
        # from the job_id index alone: asking which probes failed reads every probe row (5x)
        query = select(table.job_id, func.count()).where(among(table.job_id, job_ids))
        return dict(plain_rows(session, query.group_by(table.job_id)))

    probes, arms = per_job(Probe), per_job(Run)
    return {job_id: (probes.get(job_id, 0), arms.get(job_id, 0)) for job_id in probes | arms}


def list_jobs(session: Session, study: str | None = None) -> list[Row]:
    """One row per job (of ``study``, or all) in job order (``time`` metadata, else ingest
    time), with counts and its metadata as a dict by key; times are datetimes in UTC."""
    probes = _probe_counts().subquery()
    runs = (
        select(
            Run.job_id,
            func.count(func.distinct(Run.id)).label("arms"),
            func.coalesce(func.sum(Curve.n_points), 0).label("points"),
        )
        .join(Curve, Curve.run_id == Run.id, isouter=True)
        .group_by(Run.job_id)
        .subquery()
    )
    rows = session.execute(
        select(
            Job.id,
            Job.name,
            Job.ingested_at,
            func.coalesce(probes.c.probes, 0),
            func.coalesce(probes.c.failed_probes, 0),
            func.coalesce(runs.c.arms, 0),
            func.coalesce(runs.c.points, 0),
            Job.source_path,
        )
        .outerjoin(probes, probes.c.job_id == Job.id)
        .outerjoin(runs, runs.c.job_id == Job.id)
        .where(true() if study is None else Job.study == study)
        .order_by(Job.ingested_at, Job.id)
    ).all()
    meta = _meta(session, [row[0] for row in rows])
    checked_runs(session, [row[0] for row in rows])  # the counts it shows are the runs'
    listed = [
        {
            "job": name,
            "time": job_time(meta.get(job_id, {}), ingested_at),
            "ingested_at": as_utc(ingested_at).astimezone(UTC),
            "probes": probes_n,
            "failed_probes": failed,
            "arms": arms,
            "points": points,
            "meta": meta.get(job_id, {}),
            "source": source,
        }
        for job_id, name, ingested_at, probes_n, failed, arms, points, source in rows
    ]
    listed.sort(key=lambda row: row["time"])
    for row in listed:
        row["time"] = row["time"].astimezone(UTC)
    return listed


def parse_where(items: Iterable[str] | None) -> tuple[Condition, ...]:
    """Conditions as users type them (``KEY=VALUE``, ``val_loss<3.3``: ``tracker.conditions``);
    a ``ValueError`` names the operators. A ``time`` is compared as stored."""
    conditions = []
    for item in items or ():
        condition = parse_condition(item)
        value = checked_meta({condition.key: condition.value})[condition.key]
        conditions.append(Condition(condition.key, value, condition.op))
    return tuple(conditions)


def check_meta_keys(session: Session, keys: Iterable[str]) -> None:
    """A metadata key no job has is an error naming the known ones."""
    wanted = list(keys)
    if wanted:
        known = set(session.scalars(select(JobMeta.key).distinct()))
        for key in wanted:
            if key not in known:
                raise UnknownMetaKey(key=key, known=known_names(known, near=key))


def check_meta_values(session: Session, where: Iterable[Condition]) -> None:
    """A ``--where`` value no job has is an error naming the known ones (and a case slip);
    only for ``=``: an order or ``!=`` may hold for values no job has."""
    for condition in where:
        if condition.op != "=":
            continue
        key, value = condition.key, condition.value
        known = set(session.scalars(select(JobMeta.value).distinct().where(JobMeta.key == key)))
        if value not in known:
            shown = f"{key}={{}}"
            hint = case_hint(value, known, shown) or did_you_mean(value, known, shown)
            raise UnknownValue(what=f"{key}={value}", known=known_names(known), hint=hint)


def meta_holds(meta: Mapping[str, str], where: Iterable[Condition]) -> bool:
    """Whether a job's metadata satisfies every (metadata) condition."""
    return all(condition.holds(meta.get(condition.key)) for condition in where)


def select_jobs(
    session: Session,
    where: Iterable[Condition | tuple[str, str]] = (),
    since: datetime | None = None,
) -> list[Row]:
    """The rows of ``list_jobs`` satisfying every ``where`` condition (on metadata or on runs:
    ``tracker.store.runfilter``), at or after ``since``; a key or value no job has, or a
    ``since`` after every such job, is an error, as in the queries
    (``tracker.queries.selection``)."""
    conditions = as_conditions(where)
    meta, on_runs = meta_conditions(conditions), run_conditions(conditions)
    check_where(session, conditions)
    check_meta_values(session, meta)
    rows = [row for row in list_jobs(session) if meta_holds(row["meta"], meta)]
    if on_runs:
        names: dict[int, str] = {
            job_id: name for job_id, name in session.execute(select(Job.id, Job.name))
        }
        matched = matching_runs(session, list(names), on_runs).values()
        kept_names = {names[job_id] for job_id in matched}
        rows = [row for row in rows if row["job"] in kept_names]
    kept = [row for row in rows if since is None or row["time"] >= since]
    if since is not None and rows and not kept:
        latest = rows[-1]  # job order is time order
        raise NoJobSince(
            since=format_time(since),
            latest=format_time(latest["time"]),
            job=latest["job"],
        )
    return kept


def meta_text(meta: Mapping[str, str]) -> str:
    """Metadata as one line of text, for tables: ``KEY=VALUE`` pairs by key."""
    return " ".join(f"{key}={value}" for key, value in sorted(meta.items()))


# The statements every page runs are built once: a statement object keeps its cache key,
# where building one per call costs SQLAlchemy more than the query (about 0.4 ms a page's
# query on SQLite).
_JOB_NAMED = select(Job).where(Job.name == bindparam("name"))
_RUN_CURVES = (
    select(
        Run.id, Run.arm, Run.extra, Curve.metric, Curve.n_points, Curve.first_step, Curve.last_step
    )
    .outerjoin(Curve, Curve.run_id == Run.id)
    .where(Run.job_id == bindparam("job_id"))
    .order_by(Run.variant, Run.seed, Curve.metric)
)


_JOBS_BY_ID = select(Job).where(among(Job.id, "job_ids")).order_by(Job.id)


def jobs_by_id(session: Session, job_ids: list[int]) -> list[Job]:
    """The listed jobs' rows in id order: one statement whatever their number."""
    return list(session.scalars(_JOBS_BY_ID, {"job_ids": job_ids}))


def get_job(session: Session, name: str) -> Job:
    job = session.scalars(_JOB_NAMED, {"name": name}).one_or_none()
    if job is None:
        raise UnknownJob(name=name, known=known_names(session.scalars(select(Job.name)), near=name))
    return job


def job_probes(session: Session, name: str) -> list[Row]:
    """A job's probes, smallest model first (a model's size: its largest parameter count, so
    a failed probe stays with its model's others), then by variant."""
    job = get_job(session, name)
    probes = list(session.scalars(select(Probe).where(Probe.job_id == job.id)))
    sizes: dict[str, int] = {}
    for p in probes:
        sizes[p.model] = max(sizes.get(p.model, 0), p.n_params or 0)
    probes.sort(key=lambda p: (sizes[p.model] == 0, sizes[p.model], p.model, p.variant))
    return [
        {
            "model": p.model,
            "variant": p.variant,
            **{column: getattr(p, column) for column in PROBE_NUMBERS},
            "error": p.error or "",
        }
        for p in probes
    ]


def job_arms(session: Session, name: str) -> list[Row]:
    job = get_job(session, name)
    loss = select(Curve).where(Curve.metric == LOSS).subquery()
    rows = session.execute(
        select(Run, loss.c.n_points, loss.c.last_value, loss.c.min_value, loss.c.last_step)
        .outerjoin(loss, loss.c.run_id == Run.id)
        .where(Run.job_id == job.id)
        .order_by(Run.variant, Run.seed)
    ).all()
    notes = checked_runs(session, [job.id])
    ends = {run.arm: (last_step, summary_steps(run.extra)) for run, *_, last_step in rows}
    stopped = stopped_arms(ends)
    return [
        {
            "arm": run.arm,
            "model": run.model,
            "variant": run.variant,
            "seed": run.seed,
            "points": n_points or 0,
            "last_loss": last,
            "min_loss": low,
            "val_loss": run.val_loss,
            "final_loss": run.final_loss,
            "diverged": run.diverged,
            "notes": notes_text(notes.get(run.id, [])),
            "stopped": stopped[run.arm].message if run.arm in stopped else None,
        }
        for run, n_points, last, low, _ in rows
    ]


def job_curves(session: Session, name: str) -> list[Row]:
    """Every curve of a job's arms: ``arm``, ``metric``, ``points``, first and last step."""
    job_id = get_job(session, name).id
    checked_runs(session, [job_id])
    return run_curves(session, job_id)[1]


def run_curves(
    session: Session, job_id: int
) -> tuple[dict[int, tuple[str, dict[str, Any] | None]], list[Row]]:
    """A job's runs (id -> arm and extra, by variant and seed) and ``job_curves``, in one query
    (unchecked: the caller checks them, ``tracker.store.run_rows.checked_runs``)."""
    rows = session.execute(_RUN_CURVES, {"job_id": job_id}).all()
    runs = {run_id: (arm, extra) for run_id, arm, extra, *_ in rows}
    curves = [
        {"arm": arm, "metric": metric, "points": n, "first_step": first, "last_step": last}
        for _, arm, _, metric, n, first, last in rows
        if metric is not None
    ]
    return runs, curves


def job_meta(session: Session, name: str) -> dict[str, str]:
    """A job's metadata, by key."""
    job_id = get_job(session, name).id
    return _meta(session, [job_id]).get(job_id, {})


def edit_job_meta(
    session: Session, name: str, meta: Mapping[str, str], unset: Iterable[str] = ()
) -> dict[str, str]:
    """Set and remove metadata keys of a stored job; returns its metadata afterwards."""
    update_meta(get_job(session, name), meta, unset)
    session.flush()
    return job_meta(session, name)


def delete_job(session: Session, name: str) -> None:
    delete_job_rows(session, get_job(session, name).id)


def update_meta(
    job: Job, meta: Mapping[str, str], unset: Iterable[str] = ()
) -> dict[str, str | None]:
    """Set ``meta`` and remove the ``unset`` keys of a stored job (``time`` checked).

    Returns what changed: each key with its new value, None for a removed one.
    """
    meta = checked_meta(meta)
    stored = {row.key: row for row in job.meta}
    changed: dict[str, str | None] = {}
    for key in unset:
        if key not in stored:
            raise MissingMetaKey(job=job.name, key=key, known=known_names(stored, near=key))
        job.meta.remove(stored.pop(key))
        changed[key] = None
    for key, value in meta.items():
        if key not in stored:
            job.meta.append(JobMeta(key=key, value=value))
        elif stored[key].value != value:
            stored[key].value = value
        else:
            continue
        changed[key] = value
    return changed


def delete_job_rows(session: Session, job_id: int) -> None:
    """Delete a job and all it owns, its curves' chunks included, by the database's cascades."""
    # a plain SQL delete: the ORM would fetch every deleted row back to synchronise a session
    quiet = {"synchronize_session": False}
    session.execute(delete(Job).where(Job.id == job_id), execution_options=quiet)

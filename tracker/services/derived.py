"""Computing a job's derived rows (summary, verdicts, numbers) and persisting them, and
refilling them for the jobs that lack them (``tracker db rederive``, run by ``db upgrade``).

Old migrations only change the schema; the rows a newer analysis or a new table needs are
refilled here, by today's analysis, one transaction per job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import polars as pl
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tracker.analysis.expectations import Expectations, load_expectations
from tracker.models import Job
from tracker.store import db
from tracker.store.derived import jobs_without_rows, write_derived
from tracker.store.jobdata import load_job_data
from tracker.summary.build import derive, summarize
from tracker.summary.version import expectations_digest


def _job_name(session: Session, job_id: int) -> str | None:
    return session.scalar(select(Job.name).where(Job.id == job_id))


def store_derived(
    session: Session,
    job_id: int,
    exp: Expectations,
    losses: dict[str, pl.DataFrame] | None = None,
) -> None:
    """(Re)compute and store a job's derived rows, in the caller's transaction; ``losses``
    (each arm's loss curve, as stored) spares reading the points back."""
    name = _job_name(session, job_id)
    assert name is not None
    summary = summarize(load_job_data(session, name, curves=losses), exp)
    derived = derive(summary, exp)
    digest = expectations_digest(exp)
    write_derived(session, job_id, digest, derived.verdicts, derived.numbers, summary.to_json())


def store_packaged_derived(
    session: Session, job_id: int, losses: dict[str, pl.DataFrame] | None = None
) -> None:
    """A new job's derived rows against the packaged expectations (at ingest and copy)."""
    store_derived(session, job_id, load_expectations(), losses)


@dataclass
class Rederived:
    """What ``rederive`` did: the jobs refilled, of how many."""

    jobs: int  # every job of the database
    refilled: list[str] = field(default_factory=list)

    def outcome_line(self) -> str:
        up_to_date = self.jobs - len(self.refilled)
        return f"{len(self.refilled)} jobs rederived, {up_to_date} already up to date"


def _refill(session: Session, job_id: int, exp: Expectations) -> bool:
    """One job's rows, unless it was deleted since it was listed."""
    if _job_name(session, job_id) is None:
        return False
    store_derived(session, job_id, exp)
    return True


def rederive(
    engine: Engine,
    exp: Expectations | None = None,
    on_job: Callable[[str], None] | None = None,
) -> Rederived:
    """Refill the derived rows of every job lacking them for ``exp`` (the packaged
    expectations by default), one transaction per job; ``on_job`` is told each one done."""
    if exp is None:
        exp = load_expectations()
    with Session(engine) as session:
        missing = jobs_without_rows(session, expectations_digest(exp))
        done = Rederived(session.scalar(select(func.count()).select_from(Job)) or 0)
    for job_id, name in missing:
        if db.in_write_transaction(engine, partial(_refill, job_id=job_id, exp=exp)):
            done.refilled.append(name)
            if on_job is not None:
                on_job(name)
    return done

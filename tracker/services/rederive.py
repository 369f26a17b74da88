"""Computing a job's derived rows (summary, verdicts, numbers) and persisting them, and
refilling them for the jobs that lack them (``tracker db rederive``, run by ``db upgrade``).

Old migrations only change the schema; the rows a newer analysis or a new table needs are
refilled here, by today's analysis, one transaction per job.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial

import polars as pl
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tracker.analysis.expectations import Expectations, judged_by
from tracker.models import Job
from tracker.services.interrupts import raise_lost_interrupt
from tracker.store import transactions
from tracker.store.jobdata import load_job_data
from tracker.store.kept_rows import jobs_without_rows, write_derived
from tracker.store.run_rows import verified_runs
from tracker.store.study_definitions import stored_study
from tracker.store.verdict_keys import sweep_keys
from tracker.summary.build import derive, summarize
from tracker.summary.run_index import packed_index
from tracker.summary.version import CODE_DIGEST, expectations_digest


def _job_name(session: Session, job_id: int) -> str | None:
    return session.scalar(select(Job.name).where(Job.id == job_id))


def store_derived(
    session: Session,
    job_id: int,
    exp: Expectations,
    losses: dict[str, pl.DataFrame] | None = None,
    *,
    new_job: bool = False,
) -> None:
    """(Re)compute and store a job's derived rows, in the caller's transaction; ``losses``
    (each arm's loss curve, as stored) spares reading the points back; ``new_job``: one
    just written, which has no rows to replace."""
    name = _job_name(session, job_id)
    assert name is not None
    summary = summarize(load_job_data(session, name, curves=losses), exp)
    derived = derive(summary, exp)
    digest = expectations_digest(exp)
    stored = summary.to_stored(name)
    curves = summary.curves_to_stored(name)
    verdicts, numbers = derived.verdicts, derived.numbers
    runs = (CODE_DIGEST, packed_index(verified_runs(session, [job_id])))
    write_derived(
        session, job_id, digest, verdicts, numbers, stored, curves, runs, replace=not new_job
    )


def store_packaged_derived(
    session: Session, job_id: int, losses: dict[str, pl.DataFrame] | None = None
) -> None:
    """A new job's derived rows against its study's expectations (``judged_by``: its file's,
    else the definition the database keeps), at ingest and copy."""
    study = session.scalar(select(Job.study).where(Job.id == job_id))
    assert study is not None
    exp = judged_by(study, stored_study(session, study))
    store_derived(session, job_id, exp, losses, new_job=True)


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


def _jobs(session: Session, study: str | None) -> list[tuple[int, str]]:
    """``(id, name)`` of every job (of ``study``, or all)."""
    query = select(Job.id, Job.name).order_by(Job.id)
    if study is not None:
        query = query.where(Job.study == study)
    return [(job_id, name) for job_id, name in session.execute(query)]


def rederive(
    engine: Engine,
    exp: Expectations | None = None,
    on_job: Callable[[str], None] | None = None,
    force: bool = False,
    only: Collection[str] | None = None,
) -> Rederived:
    """Refill the derived rows of every job lacking them for ``exp`` (by default each job's
    own study's packaged expectations), one transaction per job; ``on_job`` is told each one
    done. ``force``: rebuild them whether they are there or not (being derived, they are
    rebuilt after damage: ``tracker db check --repair``); ``only``: of these jobs alone."""
    with Session(engine) as session:
        if exp is None:
            studies = list(session.scalars(select(Job.study).distinct().order_by(Job.study)))
            judged: list[tuple[Expectations, str | None]] = [
                (judged_by(study, stored_study(session, study)), study) for study in studies
            ]
        else:
            judged = [(exp, None)]
        missing = [
            (job_id, name, own)
            for own, study in judged
            for job_id, name in (
                _jobs(session, study)
                if force
                else jobs_without_rows(session, expectations_digest(own), CODE_DIGEST, study)
            )
            if only is None or name in only
        ]
        done = Rederived(session.scalar(select(func.count()).select_from(Job)) or 0)
    for job_id, name, own in sorted(missing, key=lambda job: job[0]):
        if transactions.in_write_transaction(engine, partial(_refill, job_id=job_id, exp=own)):
            done.refilled.append(name)
            if on_job is not None:
                on_job(name)
        raise_lost_interrupt()  # between jobs: what is refilled stays
    if done.refilled:  # the keys only the replaced rows used
        transactions.in_write_transaction(engine, sweep_keys)
    return done

"""The study definitions a database keeps: each study file's exact text once, by its digest,
and each job's digest of the one it was ingested with (a teammate without the file judges
the jobs by it: ``tracker.analysis.expectations.judged_by``)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.analysis.study_files import StoredStudy
from tracker.models import Job, StudyDefinition


def keep_study_definition(session: Session, job: Job, stored: StoredStudy) -> None:
    """``job`` points to the definition of its study ``stored`` (kept once per digest), in
    the caller's transaction."""
    if session.get(StudyDefinition, stored.digest) is None:
        session.add(StudyDefinition(digest=stored.digest, name=job.study, text=stored.text))
        session.flush()
    job.study_digest = stored.digest


def stored_study(session: Session, name: str) -> StoredStudy | None:
    """The definition of the study ``name`` its latest job was ingested with (None where
    no job of it has one: jobs stored before databases kept them)."""
    query = (
        select(StudyDefinition.digest, StudyDefinition.text)
        .join(Job, Job.study_digest == StudyDefinition.digest)
        .where(Job.study == name)
        .order_by(Job.ingested_at.desc(), Job.id.desc())
        .limit(1)
    )
    found = session.execute(query).first()
    return None if found is None else StoredStudy(found.digest, found.text)


def defined_studies(session: Session) -> list[str]:
    """The studies some job of which has a stored definition (``stored_study``), by name."""
    query = (
        select(Job.study)
        .join(StudyDefinition, Job.study_digest == StudyDefinition.digest)
        .distinct()
        .order_by(Job.study)
    )
    return list(session.scalars(query))


def copy_study_definition(source: Session, destination: Session, digest: str) -> None:
    """The definition ``digest`` of ``source`` into ``destination`` (unless it has it)."""
    if destination.get(StudyDefinition, digest) is None:
        kept = source.get_one(StudyDefinition, digest)
        destination.add(StudyDefinition(digest=kept.digest, name=kept.name, text=kept.text))
        destination.flush()

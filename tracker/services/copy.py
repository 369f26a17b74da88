"""Copying a job between tracker databases: its rows, then its derived rows made afresh
against the packaged expectations (as an ingest makes them)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.services.derived import store_packaged_derived
from tracker.store.copy import CopiedJob, copy_job_rows, job_names
from tracker.store.db import in_write_transaction, open_database

__all__ = ["CopiedJob", "copy_job", "copy_jobs", "job_names"]


def copy_job(source: Session, destination: Session, name: str) -> CopiedJob:
    """Copy one job into ``destination``'s transaction, unless it is already there."""
    copied = copy_job_rows(source, destination, name)
    if copied.job_id is not None:
        store_packaged_derived(destination, copied.job_id)
    return copied


def copy_jobs(source: str | Engine, destination: str | Engine) -> Iterator[CopiedJob]:
    """Copy every job the destination lacks, with all its data, one transaction per job,
    oldest first; yields each job's outcome as it is done (a ``conflict`` is not copied)."""
    reader = source if isinstance(source, Engine) else open_database(source, may_create_file=False)
    target = destination if isinstance(destination, Engine) else open_database(destination)
    try:
        with Session(reader) as session:
            for name in job_names(session):
                yield in_write_transaction(target, partial(copy_job, session, name=name))
    finally:
        for engine, given in ((reader, source), (target, destination)):
            if engine is not given:
                engine.dispose()

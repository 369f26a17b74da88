"""Copying a job between tracker databases: its rows, then its derived rows made afresh
against the packaged expectations (as an ingest makes them)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from tracker.services.derived import store_packaged_derived
from tracker.store.copy import CopiedJob, copy_job_rows, job_names

__all__ = ["CopiedJob", "copy_job", "job_names"]


def copy_job(source: Session, destination: Session, name: str) -> CopiedJob:
    """Copy one job into ``destination``'s transaction, unless it is already there."""
    copied = copy_job_rows(source, destination, name)
    if copied.job_id is not None:
        store_packaged_derived(destination, copied.job_id)
    return copied

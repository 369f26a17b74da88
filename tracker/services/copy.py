"""Copying a job between tracker databases: its rows, then its derived rows made afresh
against the packaged expectations (as an ingest makes them)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.services.interrupts import Tally, session_after_interrupt, telling_interrupts
from tracker.services.rederive import store_packaged_derived
from tracker.store.copy import CopiedJob, copy_job_rows, job_names
from tracker.store.job_rows import stored_digest
from tracker.store.schema import open_database
from tracker.store.transactions import in_write_transaction, refresh_statistics

__all__ = ["CopiedJob", "copy_job", "copy_jobs", "job_names"]


def copy_job(
    source: Session, destination: Session, name: str, meta_as_source: bool = False
) -> CopiedJob:
    """Copy one job into ``destination``'s transaction, unless it is already there (then,
    ``meta_as_source``: its metadata made the source's, keys only it has removed)."""
    copied = copy_job_rows(source, destination, name, meta_as_source)
    if copied.job_id is not None:
        store_packaged_derived(destination, copied.job_id)
    return copied


def _landed(target: Engine, digests: dict[str, str], name: str) -> bool:
    """Whether the destination holds the job ``name`` with the source's content."""
    with session_after_interrupt(target) as destination:
        return stored_digest(destination, name) == digests[name]


def copy_jobs(
    source: str | Engine,
    destination: str | Engine,
    on_job: Callable[[CopiedJob], None] | None = None,
    *,
    meta_as_source: bool = False,
) -> list[CopiedJob]:
    """Copy every job the destination lacks, with all its data, one transaction per job,
    oldest first; ``on_job`` is told each job's outcome as it is done (a ``conflict`` is not
    copied). Of a job both hold, the metadata edited in the source since is carried over;
    with ``meta_as_source`` the keys only the destination has are removed too (a source's
    ``meta --unset``). An interrupt raises ``Interrupted``, naming the jobs the destination holds
    (copied or already there) and those it does not."""
    reader = source if isinstance(source, Engine) else open_database(source, may_create_file=False)
    target = destination if isinstance(destination, Engine) else open_database(destination)
    outcomes: list[CopiedJob] = []
    try:
        with Session(reader) as session:
            names = job_names(session)
            # known before any interrupt: the source's session may be mid-read when it comes
            digests = {name: stored_digest(session, name) or "" for name in names}
            tally = Tally(names, landed=partial(_landed, target, digests))
            with telling_interrupts(tally):
                for name in names:
                    copied = in_write_transaction(
                        target, partial(copy_job, session, name=name, meta_as_source=meta_as_source)
                    )
                    if copied.status == "conflict":
                        tally.not_stored(name)
                    else:
                        tally.stored(name)
                    outcomes.append(copied)
                    if on_job is not None:
                        on_job(copied)
                if any(copied.status == "copied" for copied in outcomes):
                    refresh_statistics(target)
    finally:
        for engine, given in ((reader, source), (target, destination)):
            if engine is not given:
                engine.dispose()
    return outcomes

"""``tracker sync``: ingest every finished job directory under a prefix that is not stored yet.

A job directory is a directory (at any depth below the prefix) that directly holds
``mem_sweep.json``, a ``*.jsonl`` probe file or an arm file (``<variant>_s<seed>.csv`` /
``.json``). It is **finished** when ``mem_sweep.json`` is there and every arm CSV has its
summary JSON (a training job writes an arm's summary when the arm ends); until then it is
``waiting``. The job's name is its directory's name.

A stored job whose content files the listing shows with the names, sizes and versions kept at
ingest is ``unchanged``, and nothing of it is downloaded. Otherwise its files are read, in the
job's own write transaction: the same content digest is ``unchanged`` (the new versions are
kept, so the next sync skips it again), another is ``changed`` and left alone unless
``replace``. Each job is its own transaction, so a killed sync resumes where it stopped, and
two syncs at once never store a job twice (the job name is unique: the later one finds it).

Whatever goes wrong with one job (a key too long for the local disk, an object that cannot be
read, a bad name) is that job's one ``failed`` line, and the pass goes on; only a storage that
stops answering (``UNREACHABLE_IN_A_ROW`` jobs in a row it could not read) ends the pass early,
with one line, rather than costing one timeout per job left.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from tracker.domain import DEFAULT_ARM_MODEL, ArmName, IngestStatus
from tracker.errors import (
    JobExists,
    StorageFailed,
    StorageUnreadable,
    TrackerError,
)
from tracker.jobdir.reader import PROBE_FILE, scan_job, validate_job_name
from tracker.jobdir.source import JobSource, Listing, open_source
from tracker.models import Job
from tracker.services.ingest import IngestOptions, IngestResult, check_job, ingest_job
from tracker.services.interrupts import Tally, session_after_interrupt
from tracker.signal_note import interrupted
from tracker.store import transactions
from tracker.store.job_rows import set_file_versions, stored_listings

UNREACHABLE_IN_A_ROW = 3  # jobs in a row the storage could not give: it is down, stop the pass


class SyncStatus(StrEnum):
    INGESTED = "ingested"
    WOULD_INGEST = "would ingest"  # a dry run's new job, read and checked as an ingest would
    REPLACED = "replaced"
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    WAITING = "waiting"
    FAILED = "failed"


@dataclass(frozen=True)
class SyncOptions:
    """How ``sync_prefix`` stores what it finds (``meta`` goes to the jobs it ingests)."""

    meta: Mapping[str, str] = field(default_factory=dict)
    replace: bool = False
    dry_run: bool = False
    arm_model: str = DEFAULT_ARM_MODEL
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    study: str | None = None  # the jobs' study; None: each job.json's, else the default


@dataclass
class SyncedJob:
    location: str  # the job directory's path or URL
    status: SyncStatus
    detail: str = ""  # why it waits, what changed, the error
    result: IngestResult | None = None
    unreachable: bool = False  # failed because the storage did not give its files

    def line(self) -> str:
        if self.result is not None and self.status != SyncStatus.UNCHANGED:
            return self.result.outcome_line()
        return f"{self.location}: {self.status}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class SyncReport:
    """One pass of ``sync_prefix``: each job directory found, with what became of it."""

    prefix: str
    jobs: list[SyncedJob] = field(default_factory=list)
    stopped: str = ""  # why the pass ended before the last job, if it did

    @property
    def failed(self) -> list[SyncedJob]:
        return [job for job in self.jobs if job.status == SyncStatus.FAILED]

    def outcome_line(self) -> str:
        """``12 found: 3 ingested, 9 unchanged, 0 failed`` (replaced, changed and waiting
        counted too when there are any; failed ones named)."""
        counts = Counter(job.status for job in self.jobs)
        first = SyncStatus.WOULD_INGEST if counts[SyncStatus.WOULD_INGEST] else SyncStatus.INGESTED
        parts = [f"{counts[first]} {first}"]
        parts += [f"{counts[s]} {s}" for s in (SyncStatus.REPLACED,) if counts[s]]
        parts.append(f"{counts[SyncStatus.UNCHANGED]} unchanged")
        parts += [f"{counts[s]} {s}" for s in (SyncStatus.CHANGED, SyncStatus.WAITING) if counts[s]]
        failed = f"{len(self.failed)} failed"
        if self.failed:
            failed += f" ({', '.join(job.location for job in self.failed)})"
        line = f"{len(self.jobs)} found: {', '.join([*parts, failed])}"
        return f"{line}; {self.stopped}" if self.stopped else line


def content_files(listing: Listing) -> dict[str, tuple[int, str | None]]:
    """The files an ingest reads, as listed: name -> (size, version)."""
    return {
        f.name: (f.size, f.version)
        for f in listing.files
        if f.name == PROBE_FILE or f.name.endswith(".jsonl") or _arm_file(f.name)
    }


def _arm_file(name: str) -> bool:
    stem, _, suffix = name.rpartition(".")  # string work: a sync looks at every file listed
    return suffix in ("csv", "json") and ArmName.find(stem) is not None


def waiting_for(listing: Listing) -> str | None:
    """Why a job directory is not finished yet, or None when it is."""
    names = {f.name for f in listing.files}
    if PROBE_FILE not in names:
        return f"no {PROBE_FILE} yet"
    for name in sorted(names):
        stem, _, suffix = name.rpartition(".")
        if suffix == "csv" and f"{stem}.json" not in names:
            return f"{name} has no summary {stem}.json yet"
    return None


def sync_prefix(
    engine: Engine,
    prefix: str | Path,
    options: SyncOptions,
    on_job: Callable[[SyncedJob], None] | None = None,
    tally: Tally | None = None,
) -> SyncReport:
    """Find the job directories under ``prefix`` (a path or an fsspec URL) and ingest the
    finished ones that are not stored, each in its own transaction; ``on_job`` is told of
    each job as it is done, ``tally`` of each job written (for the line an interrupt ends
    with: ``tracker.services.interrupts``). A prefix that cannot be listed is one
    ``TrackerError``."""
    tally = tally or Tally([])
    source = open_source(prefix, options.storage_options)
    found = [d for d in source.walk() if content_files(d.listing())]
    with transactions.write_session(engine) as session:
        stored = stored_listings(session)
    first_of: dict[str, JobSource] = {}
    report = SyncReport(str(prefix))
    in_a_row = 0
    for done, directory in enumerate(found, 1):
        first = first_of.setdefault(directory.name, directory)
        if first is not directory:  # two directories, one job name: neither may shadow
            problem = f"{directory}: the job name {directory.name!r} is also that of {first}"
            job = SyncedJob(directory.location, SyncStatus.FAILED, problem)
        else:
            job = _sync_job(engine, directory, stored, options, tally)
        report.jobs.append(job)
        if on_job is not None:
            on_job(job)
        in_a_row = in_a_row + 1 if job.unreachable else 0
        if in_a_row == UNREACHABLE_IN_A_ROW and done < len(found):
            report.stopped = (
                f"stopped: the storage gave no files for {in_a_row} jobs in a row, "
                f"{len(found) - done} jobs not tried"
            )
            break
    if any(job.status == SyncStatus.INGESTED for job in report.jobs):
        transactions.refresh_statistics(engine)
    return report


def job_stored(engine: Engine, name: str) -> bool:
    """Whether a job ``name`` is in the database (after an interrupt: did the job in flight
    land? A replaced job counts as stored either way)."""
    with session_after_interrupt(engine) as session:
        return session.scalar(select(Job.id).where(Job.name == name)) is not None


def _sync_job(
    engine: Engine,
    directory: JobSource,
    stored: Mapping[str, Mapping[str, tuple[int, str | None]]],
    options: SyncOptions,
    tally: Tally,
) -> SyncedJob:
    where = directory.location
    reason = waiting_for(directory.listing())
    if reason is not None:
        return SyncedJob(where, SyncStatus.WAITING, reason)
    try:
        name = validate_job_name(directory.name, from_directory=True)
        listed = content_files(directory.listing())
        if name in stored and stored[name] == listed:
            return SyncedJob(where, SyncStatus.UNCHANGED)
        if options.dry_run:
            return _dry_run(engine, directory, name, stored, options)
        tally.add(name)
        result = transactions.in_write_transaction(
            engine, lambda session: _ingest(session, directory, listed, options)
        )
        tally.stored(name)
    except JobExists:
        tally.not_stored(directory.name)
        return SyncedJob(where, SyncStatus.CHANGED, "files changed since ingest; --replace")
    except SQLAlchemyError:
        raise  # the database, not this job: every later job would fail the same way
    except Exception as exc:  # anything else is this job's failure only
        if interrupted(exc):  # e.g. a transaction failing as it unwinds
            raise
        tally.not_stored(directory.name)
        message = str(exc) if isinstance(exc, TrackerError) else _unexpected(exc)
        detail = message if message.startswith(f"{where}: ") else f"{where}: {message}"
        unreachable = isinstance(exc, StorageUnreadable | StorageFailed)
        return SyncedJob(where, SyncStatus.FAILED, detail, unreachable=unreachable)
    status = {
        IngestStatus.INGESTED: SyncStatus.INGESTED,
        IngestStatus.REPLACED: SyncStatus.REPLACED,
    }.get(result.status, SyncStatus.UNCHANGED)
    return SyncedJob(where, status, result=result)


def _unexpected(exc: Exception) -> str:
    """An error no reader foresaw, as one line: its kind and first line."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _ingest(
    session: Session,
    directory: JobSource,
    listed: Mapping[str, tuple[int, str | None]],
    options: SyncOptions,
) -> IngestResult:
    result = ingest_job(
        session,
        directory,
        meta=options.meta,
        replace=options.replace,
        arm_model=options.arm_model,
        study=options.study,
    )
    if result.status in (IngestStatus.UNCHANGED, IngestStatus.METADATA_UPDATED):
        set_file_versions(session, result.job, {path: v for path, (_, v) in listed.items()})
    return result


def _dry_run(
    engine: Engine,
    directory: JobSource,
    name: str,
    stored: Mapping[str, Any],
    options: SyncOptions,
) -> SyncedJob:
    """What a sync would do, writing nothing: a new job read and checked whole as an ingest
    would (what it would refuse fails here too), a stored job's files read to tell."""
    if name not in stored:
        as_ingested = IngestOptions(
            meta=options.meta, arm_model=options.arm_model, study=options.study
        )
        check_job(directory, as_ingested)
        return SyncedJob(directory.location, SyncStatus.WOULD_INGEST)
    digest = scan_job(directory).digest
    with transactions.write_session(engine) as session:
        same = session.scalar(select(Job.content_digest).where(Job.name == name)) == digest
    status = SyncStatus.UNCHANGED if same else SyncStatus.CHANGED
    return SyncedJob(directory.location, status, "dry run")

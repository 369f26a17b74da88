"""Ingesting job directories: scan -> rows -> summary -> persist, one transaction per job.

``ingest_job`` writes one job's rows (``tracker.store.ingest.write_job``) and then its derived
rows (``tracker.services.derived``) in the caller's transaction, so an error anywhere leaves
no trace of the job. ``ingest_directories`` is the ``tracker ingest`` command's work: several
directories, each read and checked whole before its own write transaction starts (the write
lock is held only to write), a failing one reported and the others still stored; the caller
draws progress from the ``IngestProgress`` it passes. An interrupt (Ctrl-C, SIGTERM) ends it
with an ``Interrupted`` naming the jobs stored and those not (``tracker.services.interrupts``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from tracker.errors import DatabaseFailed, JobExists, NotADemoJob, TrackerError, raised_by_interrupt
from tracker.jobdir.limits import MAX_FILE_SIZE
from tracker.jobdir.reader import Arm, ArmFiles, JobDirectory, curve_bytes, read_job_arms, scan_job
from tracker.jobdir.sample import DEMO_META
from tracker.jobdir.source import JobSource, open_source
from tracker.models import Job
from tracker.services.derived import store_packaged_derived
from tracker.services.interrupts import Tally, session_after_interrupt, telling_interrupts
from tracker.store import db
from tracker.store.catalog import checked_meta
from tracker.store.ingest import (
    DEFAULT_ARM_MODEL,
    IngestResult,
    WrittenJob,
    store_job,
    stored_digest,
    write_job,
)

__all__ = [
    "IngestOptions",
    "IngestProgress",
    "IngestReport",
    "IngestResult",
    "ingest_demo_job",
    "ingest_demo_jobs",
    "ingest_directories",
    "ingest_job",
]


def ingest_job(
    session: Session,
    directory: Path | JobSource,
    *,
    name: str | None = None,
    meta: Mapping[str, str] | None = None,
    replace: bool = False,
    arm_model: str = DEFAULT_ARM_MODEL,
    on_arm: Callable[[ArmFiles], None] | None = None,
    strict_steps: bool = False,
    max_file_size: int = MAX_FILE_SIZE,
) -> IngestResult:
    """Store one job directory and its derived rows, in the caller's transaction. ``on_arm``
    is told of each arm once it is read; ``strict_steps`` refuses what real logs hold
    (a resumed run, a step logged twice, an incomplete last line) instead of settling it."""
    written = write_job(
        session,
        directory,
        name=name,
        meta=meta,
        replace=replace,
        arm_model=arm_model,
        on_arm=on_arm,
        strict_steps=strict_steps,
        max_file_size=max_file_size,
    )
    return _with_derived(session, written)


def _with_derived(session: Session, written: WrittenJob) -> IngestResult:
    if written.job_id is not None:
        store_packaged_derived(session, written.job_id, written.losses)
    return written.result


def ingest_demo_job(session: Session, directory: Path, meta: Mapping[str, str]) -> IngestResult:
    """Store a demo sample job, swapping it in for an earlier demo's job of its name (a job
    with the demo's metadata, e.g. of other ``--steps``), never for any other job."""
    existing = session.scalars(select(Job).where(Job.name == directory.name)).one_or_none()
    from_demo = existing is not None and {m.key: m.value for m in existing.meta} == dict(meta)
    try:
        return ingest_job(session, directory, meta=meta, replace=from_demo)
    except JobExists:
        raise NotADemoJob(name=directory.name) from None


def ingest_demo_jobs(
    engine: Engine, directories: Sequence[Path], on_job: Callable[[IngestResult], None]
) -> None:
    """The demo's sample jobs, each with its demo metadata, one transaction per job."""
    for directory in directories:
        ingest = partial(ingest_demo_job, directory=directory, meta=DEMO_META[directory.name])
        on_job(db.in_write_transaction(engine, ingest))


@dataclass(frozen=True)
class IngestOptions:
    """How ``tracker ingest`` stores each directory (see ``ingest_job``)."""

    name: str | None = None
    meta: Mapping[str, str] = field(default_factory=dict)
    replace: bool = False
    arm_model: str = DEFAULT_ARM_MODEL
    strict_steps: bool = False
    # for URLs, to their filesystem (credentials among them: never shown, never stored)
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    max_file_size: int = MAX_FILE_SIZE


class IngestProgress:
    """What ``ingest_directories`` tells as it goes; these do nothing (override them)."""

    def started(self, total_bytes: int) -> None:
        """Before the first directory: the bytes of curve files of all of them."""

    def arm_written(self, nbytes: int) -> None:
        """An arm is read and checked (before its job is written): its curve file's bytes."""

    def job_done(self, result: IngestResult) -> None:
        """A directory is stored (or was already)."""

    def job_failed(self, message: str) -> None:
        """A directory failed: the error, naming the directory."""

    def advanced(self, done_bytes: int) -> None:
        """A directory is done, stored or not: the bytes of the directories done so far."""


@dataclass
class IngestReport:
    """What ``ingest_directories`` did: how many directories, each outcome, the failures."""

    directories: int
    outcomes: Counter[str] = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)

    def outcome_line(self) -> str | None:
        """The closing line of several directories (none for one)."""
        if self.directories <= 1:
            return None
        counts = [f"{n} {status}" for status, n in self.outcomes.items()]
        if self.failed:
            counts.append(f"{len(self.failed)} failed ({', '.join(self.failed)})")
        return f"{self.directories} directories: {', '.join(counts)}"


def _failure(directory: Path | str | JobSource, exc: TrackerError) -> str:
    message = str(exc)  # errors about the directory itself already name it
    if not message.startswith(f"{directory}: "):
        message = f"{directory}: {message}"
    return message


def _name(source: JobSource | TrackerError, directory: Path | str) -> str:
    """The name a directory's job is stored under when none is given."""
    return source.name if isinstance(source, JobSource) else str(directory).rstrip("/")


def _read(
    engine: Engine, directory: JobSource, options: IngestOptions, progress: IngestProgress
) -> tuple[JobDirectory, Callable[[], list[Arm]]]:
    """A directory scanned, and its arms parsed and checked, all before any write lock;
    the arms of a job already stored with this content are not parsed (unless another
    writer replaces it meanwhile: then the write transaction parses them)."""
    checked_meta(options.meta)  # refused before anything is read
    scanned = scan_job(directory, options.name, max_file_size=options.max_file_size)
    read = partial(
        read_job_arms,
        scanned,
        options.arm_model,
        strict_steps=options.strict_steps,
        max_file_size=options.max_file_size,
        on_arm=lambda arm: progress.arm_written(arm.csv_path.size),
    )
    try:
        with Session(engine) as session:
            unchanged = stored_digest(session, scanned.name) == scanned.digest
    except DBAPIError as exc:  # as the write transaction would say it
        raise DatabaseFailed(reason=db.first_line(exc)) from None
    if unchanged:
        return scanned, read
    arms = read()
    return scanned, lambda: arms


def _store(
    session: Session,
    scanned: JobDirectory,
    arms: Callable[[], list[Arm]],
    options: IngestOptions,
) -> IngestResult:
    written = store_job(session, scanned, arms, meta=options.meta, replace=options.replace)
    return _with_derived(session, written)


def _landed(engine: Engine, scanned: dict[str, JobDirectory], name: str) -> bool:
    """Whether the job ``name`` is stored with the content read for it."""
    job = scanned.get(name)
    if job is None:
        return False
    with session_after_interrupt(engine) as session:
        return stored_digest(session, job.name) == job.digest


def ingest_directories(
    engine: Engine,
    directories: Sequence[Path | str],
    options: IngestOptions,
    progress: IngestProgress | None = None,
) -> IngestReport:
    """Store each directory (a path or an fsspec URL) in its own transaction; one that fails
    is reported (``progress``) and counted, and the others are still stored. An interrupt
    raises ``Interrupted``."""
    progress = progress or IngestProgress()
    sources: list[JobSource | TrackerError] = []
    for directory in directories:
        try:
            sources.append(open_source(directory, options.storage_options))
        except TrackerError as exc:  # e.g. a missing extra: that directory fails
            sources.append(exc)
    names = [
        options.name or _name(source, directory)
        for source, directory in zip(sources, directories, strict=True)
    ]
    scanned: dict[str, JobDirectory] = {}
    tally = Tally(names, landed=partial(_landed, engine, scanned))
    with telling_interrupts(tally):
        sizes = [0 if isinstance(s, TrackerError) else curve_bytes(s) for s in sources]
        progress.started(sum(sizes))
        report = IngestReport(len(directories))
        done = 0
        for directory, source, name, size in zip(directories, sources, names, sizes, strict=True):
            try:
                if isinstance(source, TrackerError):
                    raise source
                job, arms = _read(engine, source, options, progress)
                scanned[name] = job
                result = db.in_write_transaction(
                    engine, partial(_store, scanned=job, arms=arms, options=options)
                )
            except TrackerError as exc:
                if raised_by_interrupt(exc):  # e.g. a transaction failing as it unwinds
                    raise
                tally.not_stored(name)
                progress.job_failed(
                    _failure(source if isinstance(source, JobSource) else directory, exc)
                )
                report.failed.append(str(directory))
            else:
                tally.stored(name)
                progress.job_done(result)
                report.outcomes[result.status] += 1
            done += size
            progress.advanced(done)
    return report

"""Ingesting job directories: read -> rows -> summary -> persist, one transaction per job.

This module owns the pipeline: ``_scan`` reads a job directory (``tracker.jobdir``) and
gives how to parse its arms; ``_store`` hands both to the store (``store_job``), which
writes them as given, then writes the job's kept rows (``tracker.services.rederive``), in the
caller's transaction, so an error anywhere leaves no trace of the job. ``ingest_job`` is one
job in the caller's transaction; ``ingest_directory`` one directory (a path or a URL) read
and checked whole before its own write transaction starts (the write lock is held only to
write); ``ingest_directories`` the ``tracker ingest`` command's work: several of them, a
failing one reported and the others still stored, progress drawn from the
``IngestProgress`` the caller passes. An interrupt (Ctrl-C, SIGTERM) ends it with an
``Interrupted`` naming the jobs stored and those not (``tracker.services.interrupts``).
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

from tracker.analysis.expectations import DEFAULT_STUDY, check_study, study_definition
from tracker.domain import DEFAULT_ARM_MODEL, IngestStatus
from tracker.errors import DatabaseFailed, JobExists, NotADemoJob, TrackerError
from tracker.jobdir.limits import MAX_FILE_SIZE
from tracker.jobdir.reader import Arm, ArmFiles, JobDirectory, curve_bytes, read_job_arms, scan_job
from tracker.jobdir.source import JobSource, open_source
from tracker.models import Job, JobMeta
from tracker.sample import demo_meta
from tracker.services.interrupts import Tally, session_after_interrupt, telling_interrupts
from tracker.services.rederive import store_packaged_derived
from tracker.signal_note import interrupted
from tracker.store import transactions
from tracker.store.catalog import checked_meta
from tracker.store.engine import first_line
from tracker.store.job_rows import WrittenJob, store_job, stored_digest
from tracker.store.study_definitions import keep_study_definition

__all__ = [
    "IngestOptions",
    "IngestProgress",
    "IngestReport",
    "IngestResult",
    "ingest_demo_job",
    "ingest_demo_jobs",
    "ingest_directories",
    "ingest_directory",
    "ingest_job",
]


@dataclass
class IngestResult:
    """What ingesting one job directory did: its job's name, the outcome, what was written."""

    job: str
    status: IngestStatus
    probes: int = 0
    failed_probes: int = 0
    arms: int = 0
    points: int = 0
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what reading the arms settled
    meta_set: dict[str, str] = field(default_factory=dict)  # of an unchanged job
    meta_kept: dict[str, str] = field(default_factory=dict)  # of a replaced job, not given anew

    @classmethod
    def of(cls, scanned: JobDirectory, written: WrittenJob) -> IngestResult:
        return cls(
            scanned.name,
            written.status,
            written.probes,
            written.failed_probes,
            written.arms,
            written.points,
            scanned.skipped,
            written.warnings,
            written.meta_set,
            written.meta_kept,
        )

    def outcome_line(self) -> str:
        if self.status == IngestStatus.UNCHANGED:
            return f"{self.job}: unchanged, already ingested with identical content"
        if self.status == IngestStatus.METADATA_UPDATED:
            pairs = " ".join(f"{key}={value}" for key, value in self.meta_set.items())
            return f"{self.job}: identical content already ingested; metadata updated: {pairs}"
        kept = " ".join(f"{key}={value}" for key, value in sorted(self.meta_kept.items()))
        return (
            f"{self.job}: {self.status} {self.probes} probes ({self.failed_probes} failed), "
            f"{self.arms} arms, {self.points} points" + (f"; metadata kept: {kept}" if kept else "")
        )


@dataclass(frozen=True)
class IngestOptions:
    """How each directory is stored (see ``ingest_job``)."""

    name: str | None = None
    meta: Mapping[str, str] = field(default_factory=dict)
    replace: bool = False
    arm_model: str = DEFAULT_ARM_MODEL
    strict_steps: bool = False
    # for URLs, to their filesystem (credentials among them: never shown, never stored)
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    max_file_size: int = MAX_FILE_SIZE
    study: str | None = None  # the jobs' study; None: each job.json's, else the default


def _scan(
    directory: Path | JobSource,
    options: IngestOptions,
    on_arm: Callable[[ArmFiles], None] | None = None,
) -> tuple[JobDirectory, Callable[[], list[Arm]]]:
    """A directory scanned, and how to parse and check its arms (not done yet)."""
    checked_meta(options.meta)  # refused before anything is read
    if options.study is not None:
        check_study(options.study)
    scanned = scan_job(directory, options.name, max_file_size=options.max_file_size)
    read = partial(
        read_job_arms,
        scanned,
        options.arm_model,
        strict_steps=options.strict_steps,
        max_file_size=options.max_file_size,
        on_arm=on_arm,
    )
    return scanned, read


def _store(
    session: Session,
    scanned: JobDirectory,
    arms: Callable[[], Sequence[Arm]],
    options: IngestOptions,
) -> IngestResult:
    """The scanned job's rows and then its kept rows, in the caller's transaction."""
    written = store_job(session, scanned, arms, meta=options.meta, replace=options.replace)
    if written.job_id is not None:
        _set_study(session, written.job_id, options.study)
        store_packaged_derived(session, written.job_id, written.losses)
    return IngestResult.of(scanned, written)


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
    study: str | None = None,
) -> IngestResult:
    """Store one job directory and its kept rows, in the caller's transaction. ``on_arm``
    is told of each arm once it is read; ``strict_steps`` refuses what real logs hold
    (a resumed run, a step logged twice, an incomplete last line) instead of settling it;
    ``study``: the job's study (else its ``job.json``'s, else the default's). The job's own
    metadata file (``job.json``) gives the keys ``meta`` does not."""
    options = IngestOptions(
        name, meta or {}, replace, arm_model, strict_steps, max_file_size=max_file_size, study=study
    )
    scanned, arms = _scan(directory, options, on_arm)
    return _store(session, scanned, arms, options)


def check_job(directory: Path | JobSource, options: IngestOptions | None = None) -> None:
    """Read and check one job directory whole as ``ingest_job`` would, storing nothing: what
    an ingest would refuse raises here."""
    _scanned, arms = _scan(directory, options or IngestOptions())
    arms()


STUDY_KEY = "study"  # the job.json (or --meta) key that names a job's study


def _set_study(session: Session, job_id: int, study: str | None) -> None:
    """The job's study: ``study``, else its metadata's, else the default; and the exact
    text of its file, kept with the job (a database carries its studies)."""
    job = session.get_one(Job, job_id)
    named = session.scalar(
        select(JobMeta.value).where(JobMeta.job_id == job.id, JobMeta.key == STUDY_KEY)
    )
    job.study = check_study(study or named or DEFAULT_STUDY)
    keep_study_definition(session, job, study_definition(job.study))
    session.flush()


def ingest_demo_job(
    session: Session, directory: Path, meta: Mapping[str, str], study: str = DEFAULT_STUDY
) -> IngestResult:
    """Store a demo sample job, swapping it in for an earlier demo's job of its name (a job
    with the demo's metadata, e.g. of other ``--steps``), never for any other job."""
    existing = session.scalars(select(Job).where(Job.name == directory.name)).one_or_none()
    from_demo = existing is not None and {m.key: m.value for m in existing.meta} == dict(meta)
    try:
        return ingest_job(session, directory, meta=meta, replace=from_demo, study=study)
    except JobExists:
        raise NotADemoJob(name=directory.name) from None


def ingest_demo_jobs(
    engine: Engine,
    directories: Sequence[Path],
    on_job: Callable[[IngestResult], None],
    study: str = DEFAULT_STUDY,
) -> None:
    """The demo's sample jobs of ``study``, each with its demo metadata, one transaction per
    job."""
    for directory in directories:
        meta = demo_meta(directory.name, study)
        ingest = partial(ingest_demo_job, directory=directory, meta=meta, study=study)
        on_job(transactions.in_write_transaction(engine, ingest))


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


def planned_names(directories: Sequence[Path | str], name: str | None = None) -> list[str]:
    """The names the directories' jobs will be stored under, before any is opened (``name``
    when given, else each one's last path part): what an interrupt names as not stored."""
    return [name or str(d).rstrip("/").rsplit("/", 1)[-1] or str(d) for d in directories]


def _name(source: JobSource | TrackerError, directory: Path | str) -> str:
    """The name a directory's job is stored under when none is given."""
    return source.name if isinstance(source, JobSource) else str(directory).rstrip("/")


def _read(
    engine: Engine, directory: JobSource, options: IngestOptions, progress: IngestProgress
) -> tuple[JobDirectory, Callable[[], list[Arm]]]:
    """A directory scanned, and its arms parsed and checked, all before any write lock;
    the arms of a job already stored with this content are not parsed (unless another
    writer replaces it meanwhile: then the write transaction parses them)."""
    scanned, read = _scan(directory, options, lambda arm: progress.arm_written(arm.csv_path.size))
    try:
        with Session(engine) as session:
            unchanged = stored_digest(session, scanned.name) == scanned.digest
    except DBAPIError as exc:  # as the write transaction would say it
        raise DatabaseFailed(reason=first_line(exc)) from None
    if unchanged:
        return scanned, read
    arms = read()
    return scanned, lambda: arms


def ingest_directory(
    engine: Engine,
    directory: Path | str,
    options: IngestOptions,
    progress: IngestProgress | None = None,
) -> IngestResult:
    """Store one directory (a path or an fsspec URL), read and checked whole before its own
    write transaction starts; what fails is raised."""
    source = open_source(directory, options.storage_options)
    job, arms = _read(engine, source, options, progress or IngestProgress())
    return transactions.in_write_transaction(
        engine, partial(_store, scanned=job, arms=arms, options=options)
    )


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
    scanned: dict[str, JobDirectory] = {}
    planned = planned_names(directories, options.name)
    tally = Tally(planned, landed=partial(_landed, engine, scanned))
    with telling_interrupts(tally):  # from the first step: opening a URL may take seconds
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
        tally.pending = list(names)  # as the sources name their jobs
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
                result = transactions.in_write_transaction(
                    engine, partial(_store, scanned=job, arms=arms, options=options)
                )
            except TrackerError as exc:
                if interrupted(exc):  # e.g. a transaction failing as it unwinds
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
        if any(status != IngestStatus.UNCHANGED for status in report.outcomes):
            transactions.refresh_statistics(engine)
    return report

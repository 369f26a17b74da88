"""The functions of ``tracker.api`` that store or check what is stored: ingest, sync, copy,
rederive, upgrade, check and the demo (``tracker ingest``, ``sync``, ``db ...``, ``demo``),
each telling its progress to a callback the caller passes; import them from ``tracker.api``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from tracker.analysis.expectations import DEFAULT_STUDY, load_expectations, study_expectations
from tracker.api.read import claims, report
from tracker.api.rows import Database, storing_engine, using_engine
from tracker.config import database_url
from tracker.domain import DEFAULT_ARM_MODEL
from tracker.errors import TrackerError
from tracker.jobdir.limits import MAX_FILE_SIZE
from tracker.sample import write_demo_jobs, write_demo_seed_jobs
from tracker.services.check import Checked, check_database
from tracker.services.copy import CopiedJob, copy_jobs
from tracker.services.ingest import (
    IngestOptions,
    IngestProgress,
    IngestReport,
    IngestResult,
    ingest_demo_jobs,
    ingest_directory,
    planned_names,
)
from tracker.services.ingest import ingest_directories as _ingest_directories
from tracker.services.interrupts import Tally, telling_interrupts
from tracker.services.rederive import Rederived
from tracker.services.rederive import rederive as _rederive
from tracker.services.sync import (
    SyncedJob,
    SyncOptions,
    SyncReport,
    SyncStatus,
    job_stored,
    sync_prefix,
)
from tracker.store.engine import create_tracker_engine
from tracker.store.schema import Upgrade, upgrade_database

__all__ = [
    "Checked",
    "CopiedJob",
    "Demo",
    "IngestOptions",
    "IngestProgress",
    "IngestReport",
    "IngestResult",
    "Rederived",
    "SyncReport",
    "SyncStatus",
    "SyncedJob",
    "Upgrade",
    "check",
    "copy_jobs",
    "demo",
    "demo_jobs",
    "ingest",
    "ingest_directories",
    "nothing_stored_yet",
    "rederive",
    "sync",
    "upgrade",
]


def ingest(
    db: Database,
    path_or_url: Path | str,
    *,
    name: str | None = None,
    meta: Mapping[str, str] | None = None,
    replace: bool = False,
    arm_model: str = DEFAULT_ARM_MODEL,
    strict_steps: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    max_file_size: int = MAX_FILE_SIZE,
    study: str | None = None,
    progress: IngestProgress | None = None,
) -> IngestResult:
    """Store one job directory (a path or an fsspec URL: ``s3://``, ``hf://``...) as
    ``tracker ingest`` does, in one write transaction; what fails is raised (a missing SQLite
    file is created, and removed again if nothing was stored); ``study``: the job's study
    (else its ``job.json``'s, else the default); ``progress`` is told of each arm read."""
    options = IngestOptions(
        name=name,
        meta=dict(meta or {}),
        replace=replace,
        arm_model=arm_model,
        strict_steps=strict_steps,
        storage_options=dict(storage_options or {}),
        max_file_size=max_file_size,
        study=study,
    )
    with storing_engine(db) as engine:
        return ingest_directory(engine, path_or_url, options, progress)


def ingest_directories(
    db: Database,
    directories: Sequence[Path | str],
    options: IngestOptions | None = None,
    progress: IngestProgress | None = None,
) -> IngestReport:
    """Store each directory (a path or an fsspec URL) in its own transaction, as ``tracker
    ingest`` does: one that fails is told to ``progress`` and counted, and the others are
    still stored; ``progress`` is told of the bytes read and of each directory as it is done.
    An interrupt raises ``Interrupted``, naming the jobs stored and those not."""
    options = options or IngestOptions()
    with ExitStack() as stack:
        with nothing_stored_yet(directories, options.name):
            engine = stack.enter_context(storing_engine(db))
        return _ingest_directories(engine, directories, options, progress)


@contextmanager
def nothing_stored_yet(
    directories: Sequence[Path | str], name: str | None = None
) -> Iterator[None]:
    """An interrupt in the block, before any job is stored (opening the database, say),
    becomes ``Interrupted`` naming every directory's job as not stored."""
    with telling_interrupts(Tally(planned_names(directories, name))):
        yield


def sync(
    db: Database,
    prefix: Path | str,
    *,
    meta: Mapping[str, str] | None = None,
    replace: bool = False,
    dry_run: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    on_job: Callable[[SyncedJob], None] | None = None,
    study: str | None = None,
    watch: float | None = None,
    on_round: Callable[[SyncReport | TrackerError], None] | None = None,
) -> SyncReport:
    """Ingest every finished job directory under ``prefix`` that is not stored yet, one
    transaction per job, as ``tracker sync`` does; ``on_job`` is told of each job, ``on_round``
    of the report (or the error) of each pass. With ``watch``, pass again every ``watch``
    seconds until interrupted (an error then does not end it). An interrupt raises
    ``Interrupted``, naming the jobs stored and those not."""
    options = SyncOptions(
        meta=dict(meta or {}),
        replace=replace,
        dry_run=dry_run,
        storage_options=dict(storage_options or {}),
        study=study,
    )
    with using_engine(db, may_create_file=not dry_run) as engine:
        tally = Tally([], landed=partial(job_stored, engine))
        with telling_interrupts(tally):
            while True:
                outcome: SyncReport | TrackerError
                try:
                    outcome = sync_prefix(engine, prefix, options, on_job, tally)
                except TrackerError as exc:
                    if watch is None:
                        raise
                    outcome = exc  # a watch outlasts a blip
                if on_round is not None:
                    on_round(outcome)
                if watch is None:
                    assert isinstance(outcome, SyncReport)
                    return outcome
                time.sleep(watch)


def rederive(
    db: Database,
    *,
    expectations: Path | None = None,
    on_job: Callable[[str], None] | None = None,
    force: bool = False,
) -> Rederived:
    """Refill the kept rows (verdicts, numbers, summary) of every job lacking them for the
    expectations (packaged by default) and today's analysis code, one transaction per job
    (``force``: of every job, rebuilding them)."""
    with using_engine(db) as engine:
        return _rederive(engine, load_expectations(expectations), on_job, force)


def upgrade(db: Database, *, on_migrated: Callable[[Upgrade], None] | None = None) -> Upgrade:
    """Migrate the database's schema to ``HEAD`` (a SQLite file is copied aside first), then
    refill the kept rows (``rederive``); ``on_migrated`` is told before the refill."""
    engine = db if isinstance(db, Engine) else create_tracker_engine(database_url(db))
    try:
        done = upgrade_database(engine)
        if on_migrated is not None:
            on_migrated(done)
        _rederive(engine)  # what old migrations backfilled: the same rows, by today's analysis
        return done
    finally:
        if engine is not db:
            engine.dispose()


def check(
    db: Database, *, repair: bool = False, on_rebuilt: Callable[[str], None] | None = None
) -> Checked:
    """Verify every stored curve chunk (checksum, point count, steps), every kept summary and
    derived row and, on SQLite, the file's pages, as ``tracker db check`` does: the damage
    found, one line per damaged chunk, summary or row; ``repair`` rebuilds damaged derived
    rows from the job's points (``on_rebuilt`` told each job's name)."""
    with using_engine(db) as engine:
        return check_database(engine, repair, on_rebuilt)


def demo_jobs(directory: Path, *, steps: int = 2000, study: str = DEFAULT_STUDY) -> list[Path]:
    """Write the demo's sample job directories of ``study`` under ``directory`` (an unknown
    study is refused before anything is written)."""
    study_expectations(study)
    return write_demo_jobs(directory, steps=steps, study=study) + write_demo_seed_jobs(
        directory, steps=steps, study=study
    )


@dataclass
class Demo:
    """What ``demo`` did: each claim status with its count (most first), the report's index."""

    statuses: list[tuple[str, int]]
    index: Path


def demo(
    db: Database,
    directories: list[Path],
    *,
    out: Path = Path("report"),
    on_job: Callable[[IngestResult], None] | None = None,
    study: str = DEFAULT_STUDY,
) -> Demo:
    """Ingest the demo's sample jobs of ``study`` (``demo_jobs``), replacing an earlier
    demo's, and write the report of that study's jobs under ``out``."""
    with storing_engine(db) as engine:
        ingest_demo_jobs(engine, directories, on_job or (lambda _result: None), study)
        statuses = claims(engine, study=study)["status"].value_counts(sort=True)
        index = report(engine, out, study=study).index
    return Demo([(status, n) for status, n in statuses.iter_rows()], index)

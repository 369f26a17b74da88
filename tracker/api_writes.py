"""The functions of ``tracker.api`` that store: ingest, sync, rederive and upgrade (``tracker
ingest``, ``sync``, ``db rederive``, ``db upgrade``), kept apart from the queries so that
each module stays short; import them from ``tracker.api``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from tracker.access import Database, storing_engine, using_engine
from tracker.analysis.expectations import load_expectations
from tracker.config import database_url
from tracker.domain import DEFAULT_ARM_MODEL
from tracker.jobdir.limits import MAX_FILE_SIZE
from tracker.services.ingest import IngestOptions, IngestResult, ingest_directory
from tracker.services.rederive import Rederived
from tracker.services.rederive import rederive as _rederive
from tracker.services.sync import SyncedJob, SyncOptions, SyncReport, sync_prefix
from tracker.store.engine import create_tracker_engine
from tracker.store.schema import Upgrade, upgrade_database

__all__ = ["ingest", "rederive", "sync", "upgrade"]


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
) -> IngestResult:
    """Store one job directory (a path or an fsspec URL: ``s3://``, ``hf://``...) as
    ``tracker ingest`` does, in one write transaction; what fails is raised (a missing SQLite
    file is created, and removed again if nothing was stored); ``study``: the job's study
    (else its ``job.json``'s, else the default)."""
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
        return ingest_directory(engine, path_or_url, options)


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
) -> SyncReport:
    """Ingest every finished job directory under ``prefix`` that is not stored yet, one
    transaction per job, as ``tracker sync`` does once; ``on_job`` is told of each job."""
    options = SyncOptions(
        meta=dict(meta or {}),
        replace=replace,
        dry_run=dry_run,
        storage_options=dict(storage_options or {}),
        study=study,
    )
    with using_engine(db, may_create_file=not dry_run) as engine:
        return sync_prefix(engine, prefix, options, on_job)


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

"""Writing a job directory's rows (job, metadata, files, probes, runs, curves, points),
inside the caller's transaction. Its derived rows are not written here:
``tracker.services.ingest`` reads the job, writes its rows with ``store_job``, then the
derived rows.

The caller owns the transaction (one per job), so an error anywhere, even in the last file
read, leaves no trace of the job; ``--replace`` deletes the old job in the same transaction,
so it stays intact until the new one has fully landed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import polars as pl
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from tracker.domain import DEFAULT_ARM_MODEL, LOSS, IngestStatus
from tracker.errors import JobExists
from tracker.jobdir.limits import MAX_FILE_SIZE
from tracker.jobdir.reader import Arm, ArmFiles, JobDirectory, read_job_arms, scan_job
from tracker.jobdir.source import JobSource
from tracker.models import Curve, Job, JobMeta, Probe, Run, SourceFile
from tracker.store.catalog import checked_meta, delete_job_rows, update_meta
from tracker.store.points import write_points


@dataclass
class IngestResult:
    job: str
    status: IngestStatus
    probes: int = 0
    failed_probes: int = 0
    arms: int = 0
    points: int = 0
    skipped: list[str] = field(default_factory=list)
    # what reading the arms settled or found, one per note: "flash_s0: resumed at step 1500,
    # 200 steps replaced", "ref_s1: no data rows"; warnings, the job is stored
    warnings: list[str] = field(default_factory=list)
    meta_set: dict[str, str] = field(default_factory=dict)  # of an unchanged job
    meta_kept: dict[str, str] = field(default_factory=dict)  # of a replaced job, not given anew

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


@dataclass
class WrittenJob:
    """What ``write_job`` wrote: its result, and the new job's id and loss curves (as stored)
    for its derived rows; no id when the content was already stored."""

    result: IngestResult
    job_id: int | None = None
    losses: dict[str, pl.DataFrame] = field(default_factory=dict)


def write_job(
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
) -> WrittenJob:
    """Read one job directory and write its rows, all in the caller's transaction (the
    command line reads first, then writes: ``store_job``). ``on_arm`` is told of each arm
    once it is read; ``strict_steps`` refuses resumed runs, steps logged twice and an
    incomplete last line. The job's own metadata file (``job.json``) gives the keys ``meta``
    does not."""
    checked_meta(meta or {})
    scanned = scan_job(directory, name, max_file_size=max_file_size)
    read = partial(
        read_job_arms,
        scanned,
        arm_model,
        strict_steps=strict_steps,
        max_file_size=max_file_size,
        on_arm=on_arm,
    )
    return store_job(session, scanned, read, meta=meta, replace=replace)


def store_job(
    session: Session,
    scanned: JobDirectory,
    arms: Callable[[], Sequence[Arm]],
    *,
    meta: Mapping[str, str] | None = None,
    replace: bool = False,
) -> WrittenJob:
    """Write a scanned job's rows; ``arms`` gives its parsed arms, asked for only when the
    job is not stored already with the same content."""
    meta = checked_meta({**scanned.meta, **(meta or {})})  # the job's own file, under --meta
    existing = session.scalars(select(Job).where(Job.name == scanned.name)).one_or_none()
    status = IngestStatus.INGESTED
    kept: dict[str, str] = {}
    if existing is not None:
        if existing.content_digest == scanned.digest:  # metadata is not content
            changed = {k: v for k, v in update_meta(existing, meta).items() if v is not None}
            status = IngestStatus.METADATA_UPDATED if changed else IngestStatus.UNCHANGED
            result = IngestResult(scanned.name, status, skipped=scanned.skipped, meta_set=changed)
            return WrittenJob(result)
        if not replace:
            raise JobExists(name=scanned.name)
        # metadata is not content: a re-downloaded job keeps it, values given now win
        kept = {m.key: m.value for m in existing.meta if m.key not in meta}
        meta = {**kept, **meta}
    parsed = arms()
    if existing is not None:
        delete_job_rows(session, existing.id)
        session.expunge(existing)
        status = IngestStatus.REPLACED
    job = _insert_job(session, scanned, meta)
    result = IngestResult(scanned.name, status, skipped=scanned.skipped, meta_kept=kept)
    if scanned.probes:
        session.execute(insert(Probe), [{"job_id": job.id, **p.columns()} for p in scanned.probes])
    result.probes = len(scanned.probes)
    result.failed_probes = sum(p.n_params is None for p in scanned.probes)
    losses: dict[str, pl.DataFrame] = {}  # the derived rows need them; no reading back
    for arm in parsed:
        result.warnings.extend(f"{arm.name}: {note}" for note in arm.notes)
        result.points += _insert_arm(session, job.id, arm, losses)
        result.arms += 1
    return WrittenJob(result, job.id, losses)


def stored_digest(session: Session, name: str) -> str | None:
    """The content digest of the job stored under ``name``, if any."""
    return session.scalar(select(Job.content_digest).where(Job.name == name))


def _insert_job(session: Session, scanned: JobDirectory, meta: Mapping[str, str]) -> Job:
    job = Job(
        name=scanned.name,
        source_path=scanned.source.stored_location,
        ingested_at=datetime.now(UTC),
        content_digest=scanned.digest,
        meta=[JobMeta(key=key, value=value) for key, value in meta.items()],
        files=[
            SourceFile(path=f.path, sha256=f.sha256, size=f.size, version=f.version)
            for f in scanned.files
        ],
    )
    session.add(job)
    session.flush()
    return job


def _insert_arm(session: Session, job_id: int, arm: Arm, losses: dict[str, pl.DataFrame]) -> int:
    """Write one arm; its loss curve, as stored, goes into ``losses``."""
    run_id = session.execute(
        insert(Run).returning(Run.id),
        {
            "job_id": job_id,
            "arm": arm.name,
            "model": arm.model,
            "variant": arm.variant,
            "seed": arm.seed,
            "val_loss": arm.val_loss,
            "final_loss": arm.final_loss,
            "diverged": arm.diverged,
            "extra": arm.extra,
        },
    ).scalar_one()
    written = 0
    steps = arm.curves.get_column("step")
    for values in arm.curves.get_columns()[1:]:
        # two Series, not a select on the wide frame: that costs its width, once per metric
        metric = values.name
        curve = pl.DataFrame([steps, values.alias("value")]).drop_nulls()
        curve_id = session.execute(
            insert(Curve).returning(Curve.id), {"run_id": run_id, **curve_summary(metric, curve)}
        ).scalar_one()
        write_points(session.connection(), curve_id, curve)
        written += curve.height
        if metric == LOSS:
            losses[arm.name] = curve.select(
                pl.col("step").cast(pl.Int64), pl.col("value").cast(pl.Float64)
            )
    return written


def curve_summary(metric: str, curve: pl.DataFrame) -> dict[str, object]:
    """The per-curve row that lets listings skip the points: count, ends, finite range,
    how many points are NaN or infinite."""
    values = curve["value"]
    finite = values.filter(values.is_finite())
    empty = curve.height == 0
    return {
        "metric": metric,
        "n_points": curve.height,
        "first_step": None if empty else curve["step"][0],
        "last_step": None if empty else curve["step"][-1],
        "first_value": None if empty else values[0],
        "last_value": None if empty else values[-1],
        "min_value": finite.min() if finite.len() else None,
        "max_value": finite.max() if finite.len() else None,
        "n_nonfinite": curve.height - finite.len(),
    }


def stored_listings(session: Session) -> dict[str, dict[str, tuple[int, str | None]]]:
    """Every job's source files as ingested: name -> {file: (size, version)}, for a sync."""
    rows = session.execute(
        select(Job.name, SourceFile.path, SourceFile.size, SourceFile.version).join(Job.files)
    )
    listings: dict[str, dict[str, tuple[int, str | None]]] = {}
    for name, path, size, version in rows:
        listings.setdefault(name, {})[path] = (size, version)
    return listings


def set_file_versions(session: Session, name: str, versions: Mapping[str, str | None]) -> None:
    """Keep the versions a listing showed for the files of a job whose content is unchanged."""
    job = session.scalars(select(Job).where(Job.name == name)).one()
    for source_file in job.files:
        if source_file.path in versions:
            source_file.version = versions[source_file.path]

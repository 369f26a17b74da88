"""Writing a job directory's rows (job, metadata, files, probes, runs, curves, points),
inside the caller's transaction. Its derived rows are not written here:
``tracker.services.ingest`` writes the rows with ``write_job``, then the derived rows.

The caller owns the transaction (one per job), so an error anywhere, even in the last file
read, leaves no trace of the job; ``--replace`` deletes the old job in the same transaction,
so it stays intact until the new one has fully landed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from tracker.domain import DEFAULT_ARM_MODEL, LOSS, IngestStatus
from tracker.errors import JobExists
from tracker.jobdir.reader import Arm, ArmFiles, JobDirectory, read_arm, scan_job
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

    def summary(self) -> str:
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
    directory: Path,
    *,
    name: str | None = None,
    meta: Mapping[str, str] | None = None,
    replace: bool = False,
    arm_model: str = DEFAULT_ARM_MODEL,
    on_arm: Callable[[ArmFiles], None] | None = None,
    strict_steps: bool = False,
) -> WrittenJob:
    """Write one job directory's rows. ``on_arm`` is told of each arm once it is written;
    ``strict_steps`` refuses resumed runs, steps logged twice and an incomplete last line."""
    meta = checked_meta(meta or {})
    scanned = scan_job(directory, name)
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
    for arm_files in scanned.arms:
        arm = read_arm(arm_files, arm_model, strict_steps=strict_steps)
        result.warnings.extend(f"{arm.name}: {note}" for note in arm.notes)
        result.points += _insert_arm(session, job.id, arm, losses)
        result.arms += 1
        if on_arm is not None:
            on_arm(arm_files)
    return WrittenJob(result, job.id, losses)


def _insert_job(session: Session, scanned: JobDirectory, meta: Mapping[str, str]) -> Job:
    job = Job(
        name=scanned.name,
        source_path=str(scanned.path.resolve()),
        ingested_at=datetime.now(UTC),
        content_digest=scanned.digest,
        meta=[JobMeta(key=key, value=value) for key, value in meta.items()],
        files=[SourceFile(path=f.path, sha256=f.sha256, size=f.size) for f in scanned.files],
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
    for metric in arm.curves.columns[1:]:
        curve = arm.curves.select("step", pl.col(metric).alias("value")).drop_nulls()
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
    """The per-curve row that lets listings skip the points: count, ends, finite range."""
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
    }

"""Writing a job's rows (job, metadata, files, probes, runs, curves, points), as given,
inside the caller's transaction: ``tracker.services.ingest`` reads the job directory and
hands its scan and its parsed arms to ``store_job``, then writes the kept rows.

The caller owns the transaction (one per job), so an error anywhere, even in the last file
read, leaves no trace of the job; ``--replace`` deletes the old job in the same transaction,
so it stays intact until the new one has fully landed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import polars as pl
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from tracker.completeness import stopped_arms, summary_steps
from tracker.domain import LOSS, IngestStatus
from tracker.errors import JobExists
from tracker.models import Curve, Job, JobMeta, Probe, Run, RunNoteRow, SourceFile
from tracker.notes import FINDINGS, NoteKind
from tracker.store.catalog import checked_meta, delete_job_rows, update_meta
from tracker.store.points import CurveChunks, points_chunks, write_chunks
from tracker.store.raw_rows import table_of
from tracker.store.run_rows import seal_runs

if TYPE_CHECKING:
    from tracker.jobdir.reader import Arm, JobDirectory


@dataclass
class WrittenJob:
    """What ``store_job`` wrote: how much, the new job's id and its loss curves (as stored)
    for its kept rows; no id when the content was already stored."""

    status: IngestStatus
    job_id: int | None = None
    losses: dict[str, pl.DataFrame] = field(default_factory=dict)
    probes: int = 0
    failed_probes: int = 0
    arms: int = 0
    points: int = 0
    # what reading the arms settled or found, one per note: "flash_s0: resumed at step 1500,
    # 200 steps replaced", "ref_s1: no data rows"; warnings, the job is stored
    warnings: list[str] = field(default_factory=list)
    meta_set: dict[str, str] = field(default_factory=dict)  # of an unchanged job
    meta_kept: dict[str, str] = field(default_factory=dict)  # of a replaced job, not given anew


def store_job(
    session: Session,
    scanned: JobDirectory,
    arms: Callable[[], Sequence[Arm]],
    *,
    meta: Mapping[str, str] | None = None,
    replace: bool = False,
) -> WrittenJob:
    """Write a scanned job's rows; ``arms`` gives its parsed arms, asked for only when the
    job is not stored already with the same content. The job's own metadata file
    (``job.json``, in the scan) gives the keys ``meta`` does not."""
    meta = checked_meta({**scanned.meta, **(meta or {})})  # the job's own file, under --meta
    existing = session.scalars(select(Job).where(Job.name == scanned.name)).one_or_none()
    status = IngestStatus.INGESTED
    kept: dict[str, str] = {}
    if existing is not None:
        if existing.content_digest == scanned.digest:  # metadata is not content
            changed = {k: v for k, v in update_meta(existing, meta).items() if v is not None}
            status = IngestStatus.METADATA_UPDATED if changed else IngestStatus.UNCHANGED
            return WrittenJob(status, meta_set=changed)
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
    written = WrittenJob(status, job.id, meta_kept=kept)
    if scanned.probes:
        probes = [{"job_id": job.id, **p.columns()} for p in scanned.probes]
        session.execute(insert(table_of(Probe)), probes)
    written.probes = len(scanned.probes)
    written.failed_probes = sum(p.failed for p in scanned.probes)
    shared: dict[str, list[str]] = {}  # a line every arm may say alike: said once
    for arm in parsed:  # the loss curves are kept for the kept rows: no reading back
        said = [note for note in arm.notes if note.kind not in FINDINGS]
        for note in said:
            if note.kind == NoteKind.WALL_TIME:
                shared.setdefault(note.text, []).append(arm.name)
        own = (note for note in said if note.kind != NoteKind.WALL_TIME)
        written.warnings.extend(f"{arm.name}: {note}" for note in own)
    written.points = _insert_arms(session, job, parsed, written.losses)
    written.arms = len(parsed)
    seal_runs(session, [job.id])  # of its rows as written: as every read gets them
    for text, names in shared.items():
        whose = f"all {len(names)} arms" if len(names) == len(parsed) > 1 else ", ".join(names)
        written.warnings.append(f"{whose}: {text}")
    ends = {arm.name: (_last_step(arm.curves), summary_steps(arm.extra)) for arm in parsed}
    written.warnings.extend(f"{arm}: {c.message}" for arm, c in stopped_arms(ends).items())
    return written


def _last_step(curves: pl.DataFrame) -> int | None:
    last = curves["step"].max() if "step" in curves.columns and curves.height else None
    return None if last is None else int(last)  # type: ignore[arg-type]


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


@dataclass(frozen=True)
class RunRows:
    """One run as written: its columns (``arm`` among them, no job id), its notes' columns
    (``position`` among them) and its curves' (``metric`` among them), no run ids."""

    columns: Mapping[str, object]
    notes: Sequence[Mapping[str, object]]
    curves: Sequence[Mapping[str, object]]


def insert_runs(session: Session, job_id: int, runs: Sequence[RunRows]) -> list[list[int]]:
    """Write a job's runs, their notes and their curves' rows, a statement for each kind of
    row whatever the number of runs (a statement costs more than its rows on PostgreSQL);
    each run's curve ids, in the order given."""
    if not runs:
        return []
    # NULLs written as such: rows lacking a value would otherwise be a statement each
    session.execute(
        insert(Run).execution_options(render_nulls=True),
        [{"job_id": job_id, **run.columns} for run in runs],
    )
    # read back by name rather than RETURNING: SQLite's bulk insert returns no ids in order
    ids = dict(session.execute(select(Run.arm, Run.id).where(Run.job_id == job_id)).all())
    run_ids = [ids[str(run.columns["arm"])] for run in runs]
    notes = [
        {"run_id": run_id, **note}
        for run, run_id in zip(runs, run_ids, strict=True)
        for note in run.notes
    ]
    if notes:
        session.execute(insert(RunNoteRow), notes)
    curves = [
        {"run_id": run_id, **curve}
        for run, run_id in zip(runs, run_ids, strict=True)
        for curve in run.curves
    ]
    if curves:
        session.execute(insert(Curve).execution_options(render_nulls=True), curves)
    stored = select(Curve.run_id, Curve.metric, Curve.id).join(Run).where(Run.job_id == job_id)
    by_place = {(run_id, metric): curve_id for run_id, metric, curve_id in session.execute(stored)}
    return [
        [by_place[run_id, str(curve["metric"])] for curve in run.curves]
        for run, run_id in zip(runs, run_ids, strict=True)
    ]


def _insert_arms(
    session: Session, job: Job, arms: Sequence[Arm], losses: dict[str, pl.DataFrame]
) -> int:
    """Write the arms with their notes, curves and points; the loss curves, as stored, go
    into ``losses``. How many points were written."""
    runs: list[RunRows] = []
    points: list[dict[str, pl.DataFrame]] = []  # each arm's curves: metric -> points
    for arm in arms:
        steps = arm.curves.get_column("step")
        curves = {
            # two Series, not a select on the wide frame: that costs its width, once per metric
            values.name: pl.DataFrame([steps, values.alias("value")]).drop_nulls()
            for values in arm.curves.get_columns()[1:]
        }
        if LOSS in curves:
            losses[arm.name] = curves[LOSS].select(
                pl.col("step").cast(pl.Int64), pl.col("value").cast(pl.Float64)
            )
        columns = {
            "arm": arm.name,
            "model": arm.model,
            "variant": arm.variant,
            "seed": arm.seed,
            "val_loss": arm.val_loss,
            "final_loss": arm.final_loss,
            "diverged": arm.diverged,
            "extra": arm.extra,
        }
        notes = [{"position": i, **note.as_dict()} for i, note in enumerate(arm.notes)]
        summaries = [curve_summary(metric, curve) for metric, curve in curves.items()]
        runs.append(RunRows(columns, notes, summaries))
        points.append(curves)
    chunks: list[CurveChunks] = [
        ((curve_id, job.name, arm.name, metric), points_chunks(frame))
        for arm, ids, curves in zip(arms, insert_runs(session, job.id, runs), points, strict=True)
        for curve_id, (metric, frame) in zip(ids, curves.items(), strict=True)
    ]
    write_chunks(session.connection(), chunks)
    return sum(frame.height for curves in points for frame in curves.values())


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

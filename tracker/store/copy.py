"""Copying jobs between tracker databases (a local SQLite history to a team's PostgreSQL).

The command copies each job in one destination transaction, with every row it owns and the
definition of its study it was ingested with (its derived rows are computed afresh there, by
``tracker.services.copy``); a curve's chunks go over as stored (still compressed, so every
value's bits), through the same bulk path as an ingest. A job the destination already holds
is skipped, so copying twice copies nothing new, except its metadata: metadata is not
content, so values edited in the source since (``tracker meta``) are carried over, as
``ingest`` of identical content does with ``--meta``; keys only the destination has are
kept, and said (a key set there, or one removed from the source since: the destination
cannot tell which), unless ``meta_as_source`` removes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from tracker.models import Curve, Job, JobMeta, Probe, Run, RunNoteRow, SourceFile
from tracker.store.catalog import update_meta
from tracker.store.curves import stored_chunks
from tracker.store.job_rows import RunRows, insert_runs
from tracker.store.points import CurveChunks, write_chunks
from tracker.store.raw_rows import table_of
from tracker.store.run_rows import checked_runs, seal_runs
from tracker.store.study_definitions import copy_study_definition

PROBE_FIELDS = [c.key for c in Probe.__table__.columns if c.key not in ("id", "job_id")]
# its checksum is of the rows as that database reads them: made afresh there (``run_rows``)
RUN_FIELDS = [c.key for c in Run.__table__.columns if c.key not in ("id", "job_id", "checksum")]
CURVE_FIELDS = [c.key for c in Curve.__table__.columns if c.key not in ("id", "run_id")]
NOTE_FIELDS = [c.key for c in RunNoteRow.__table__.columns if c.key != "run_id"]


@dataclass
class CopiedJob:
    job: str
    # "copied", "present" (same content), "updated" (same content, its metadata updated) or
    # "conflict" (same name, other content)
    status: str
    points: int = 0
    job_id: int | None = None  # in the destination, of a job copied
    meta_set: dict[str, str] = field(default_factory=dict)  # of an updated job
    meta_unset: list[str] = field(default_factory=list)  # removed as the source has not them
    # keys the destination's job has and the source's not (set there, or removed here)
    meta_only_there: dict[str, str] = field(default_factory=dict)

    def outcome_line(self) -> str:
        if self.status == "copied":
            return f"{self.job}: copied, {self.points} points"
        extra = ""
        if self.meta_only_there:
            pairs = " ".join(f"{k}={v}" for k, v in sorted(self.meta_only_there.items()))
            extra = f"; only the destination has {pairs} (--meta-as-source removes it)"
        if self.status == "present":
            return f"{self.job}: already in the destination{extra}"
        if self.status == "updated":
            pairs = " ".join(f"{key}={value}" for key, value in sorted(self.meta_set.items()))
            pairs += " " * bool(pairs and self.meta_unset)
            pairs += " ".join(f"-{key}" for key in sorted(self.meta_unset))
            return f"{self.job}: already in the destination; metadata updated: {pairs}{extra}"
        return (
            f"{self.job}: not copied, the destination has another job of this name; to copy "
            f"this one, delete that one first (tracker --db DST_URL delete {self.job})"
        )


def _row(obj: Any, fields: list[str]) -> dict[str, Any]:
    return {field: getattr(obj, field) for field in fields}


def copy_job_rows(
    source: Session, destination: Session, name: str, meta_as_source: bool = False
) -> CopiedJob:
    """Copy one job's rows (not its derived rows, see ``tracker.services.copy``) into
    ``destination``'s transaction, unless it is already there (then its metadata edited in
    the source since; ``meta_as_source``: the keys only the destination has removed too)."""
    job = source.scalars(select(Job).where(Job.name == name)).one()
    present = destination.scalars(select(Job).where(Job.name == name)).one_or_none()
    if present is not None:
        if present.content_digest != job.content_digest:
            return CopiedJob(name, "conflict")
        source_meta = {m.key: m.value for m in job.meta}
        there = {m.key: m.value for m in present.meta if m.key not in source_meta}
        changed = update_meta(present, source_meta, there if meta_as_source else ())
        meta_set = {key: value for key, value in changed.items() if value is not None}
        unset = sorted(key for key, value in changed.items() if value is None)
        status = "updated" if changed else "present"
        kept = {} if meta_as_source else there
        return CopiedJob(name, status, meta_set=meta_set, meta_unset=unset, meta_only_there=kept)
    if job.study_digest is not None:
        copy_study_definition(source, destination, job.study_digest)
    copy = Job(
        name=job.name,
        source_path=job.source_path,
        ingested_at=job.ingested_at,
        content_digest=job.content_digest,
        study=job.study,
        study_digest=job.study_digest,
        meta=[JobMeta(key=m.key, value=m.value) for m in job.meta],
        files=[
            SourceFile(path=f.path, sha256=f.sha256, size=f.size, version=f.version)
            for f in job.files
        ],
    )
    destination.add(copy)
    destination.flush()
    probes = [{"job_id": copy.id, **_row(p, PROBE_FIELDS)} for p in job.probes]
    if probes:
        destination.execute(insert(table_of(Probe)), probes)  # as an ingest writes them
    checked_runs(source, [job.id])  # a damaged run is refused, not copied as intact
    runs = [
        RunRows(
            _row(run, RUN_FIELDS),
            [_row(note, NOTE_FIELDS) for note in run.notes],
            [_row(curve, CURVE_FIELDS) for curve in run.curves],
        )
        for run in job.runs
    ]
    chunks: list[CurveChunks] = [
        ((curve_id, name, run.arm, curve.metric), stored_chunks(source, curve.id))
        for run, ids in zip(job.runs, insert_runs(destination, copy.id, runs), strict=True)
        for curve_id, curve in zip(ids, run.curves, strict=True)
    ]
    write_chunks(destination.connection(), chunks)
    points = sum(curve.n_points for run in job.runs for curve in run.curves)
    seal_runs(destination, [copy.id])
    return CopiedJob(name, "copied", points, copy.id)


def job_names(source: Session) -> list[str]:
    """The jobs of a database, oldest ingest first: the order a copy takes them in."""
    return list(source.scalars(select(Job.name).order_by(Job.ingested_at, Job.id)))

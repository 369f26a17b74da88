"""A run's row, its notes and its curve rows under one checksum (``run.checksum``), made as
they are written and checked by every read that shows them.

The checksum is the xxh3-64 (signed, as a BIGINT holds it), seeded with the job's id, of the
job's name and the run's rows exactly as the driver reads them back (``_RUNS``, ``_NOTES``:
SQLite's text 'NaN' of a float column, its 0 or 1 of a flag, as they are): the run's columns
(its ``extra`` as the JSON text stored), its curve rows (every column but the keys, by metric)
and its notes in position order. So it is made by reading the rows back once they are written
(``seal_runs``), never from the values given, and every read hashes what it fetched without
converting a value. A value altered, two arms' names swapped, a note or curve row deleted or
moved, or the run moved to another job, no longer match. Curve points are checked by their
chunks' own checksums (``tracker.store.codec``); what a curve row says of its points is
compared with them by ``tracker db check``.

Migration 0017 keeps its own copy of ``run_checksum`` and of the statements, as an old
revision never runs today's code; ``tests/test_migrations.py`` checks that an upgraded
database holds the checksums an ingest writes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import xxhash
from sqlalchemy import Text, select, type_coerce, update
from sqlalchemy.orm import Session

from tracker.errors import DamagedRun
from tracker.models import Curve, ExactFloat, Job, Run, RunNoteRow, stored_document
from tracker.notes import RunNote
from tracker.store.raw_rows import IntactRows, JobStream, driver_rows, job_groups, streamed_rows
from tracker.store.value_lists import among

RUN_FIELDS = (Run.arm, Run.model, Run.variant, Run.seed, Run.val_loss, Run.final_loss)
CURVE_FIELDS = (
    Curve.metric,
    Curve.n_points,
    Curve.first_step,
    Curve.last_step,
    Curve.first_value,
    Curve.last_value,
    Curve.min_value,
    Curve.max_value,
    Curve.n_nonfinite,
)
NOTE_FIELDS = (
    RunNoteRow.position,
    RunNoteRow.kind,
    RunNoteRow.text,
    RunNoteRow.first_step,
    RunNoteRow.last_step,
    RunNoteRow.count,
)


def run_checksum(
    job_id: int,
    job: str,
    run: tuple[object, ...],
    curves: Iterable[tuple[object, ...]],
    notes: Iterable[tuple[object, ...]],
) -> int:
    """The checksum of a run's rows as the driver reads them: ``run`` its ``RUN_FIELDS``, then
    ``diverged`` and its ``extra`` text; ``curves`` its curve rows' ``CURVE_FIELDS`` (any order);
    ``notes`` its notes' ``NOTE_FIELDS``, in position order. A float's repr keeps its bits."""
    text = repr((job, run, sorted(curves), tuple(notes))).encode("utf-8")
    return int.from_bytes(xxhash.xxh3_64_digest(text, seed=job_id), "big", signed=True)


# built once, as every page runs them (tracker.store.catalog says why); the values are the
# driver's own (``driver_rows``)
_RUNS = (
    select(Run.id, Run.job_id, Job.name, Run.checksum, *RUN_FIELDS)
    .add_columns(type_coerce(Run.diverged, Run.seed.type), type_coerce(Run.extra, Text))
    .join(Job, Job.id == Run.job_id)
    .where(among(Run.job_id, "job_ids"))
    .order_by(Run.variant, Run.seed, Run.arm, Run.id)  # as the tables list a job's arms
)
_CURVES = (
    select(Curve.run_id, Curve.id, *CURVE_FIELDS)
    .join(Run, Run.id == Curve.run_id)
    .where(among(Run.job_id, "job_ids"))
)
_NOTES_ORDER = (RunNoteRow.run_id, RunNoteRow.position)
_NOTES = (
    select(RunNoteRow.run_id, *NOTE_FIELDS)
    .join(Run, Run.id == RunNoteRow.run_id)
    .where(among(Run.job_id, "job_ids"))
    .order_by(*_NOTES_ORDER)
)
# the same rows in job order, each with its job's id last, for a read of many jobs a job at a time
_JOB_RUNS = _RUNS.order_by(None).order_by(Run.job_id, Run.variant, Run.seed, Run.arm, Run.id)
_JOB_CURVES = _CURVES.add_columns(Run.job_id).order_by(Run.job_id, Curve.metric)
_JOB_NOTES = _NOTES.add_columns(Run.job_id).order_by(None).order_by(Run.job_id, *_NOTES_ORDER)
_VALUES = {c.key for c in CURVE_FIELDS if isinstance(c.type, ExactFloat)}


def as_read(column: str, value: object, sqlite: bool) -> object:
    """A curve column's value as the driver reads it back once written: SQLite keeps a float
    column's NaN as the text 'NaN' (``tracker.models.ExactFloat``) and -0.0 as 0.0."""
    if not sqlite or column not in _VALUES or value is None:
        return value
    number = float(value)  # type: ignore[arg-type]
    return "NaN" if math.isnan(number) else number + 0.0


@dataclass
class StoredRun:
    """A run's row (``columns``: as ``run_checksum`` takes them), its curve rows (by id) and
    its notes, as the driver read them."""

    id: int
    job_id: int
    job: str
    kept: int | None  # its checksum
    columns: tuple[object, ...]
    curves: dict[int, tuple[object, ...]] = field(default_factory=dict)
    notes: list[tuple[object, ...]] = field(default_factory=list)
    by_metric: dict[str, tuple[object, ...]] = field(default_factory=dict)  # its curve rows

    @property
    def arm(self) -> str:
        return str(self.columns[0])

    @property
    def extra(self) -> dict[str, Any] | None:
        """Its ``extra`` document, as SQLAlchemy reads it (``JSONDocument``)."""
        text = self.columns[-1]
        return stored_document(None if text is None else str(text))

    def checksum(self, numbers: Mapping[int, Mapping[str, object]] | None = None) -> int:
        """Its checksum as made of its rows, with the value columns of the curves in
        ``numbers`` (by id; as the driver reads them: ``as_read``) as given there."""
        curves = [
            tuple(numbers[curve_id].get(c.key, v) for c, v in zip(CURVE_FIELDS, row, strict=True))
            if numbers and curve_id in numbers
            else row
            for curve_id, row in self.curves.items()
        ]
        return run_checksum(self.job_id, self.job, self.columns, curves, self.notes)

    def damaged(self, numbers: Mapping[int, Mapping[str, object]] | None = None) -> bool:
        return self.kept is None or self.checksum(numbers) != self.kept

    def error(self) -> DamagedRun:
        reason = "no checksum" if self.kept is None else "checksum mismatch"
        return DamagedRun(job=self.job, arm=self.arm, reason=reason)


def stored_runs(session: Session, job_ids: Iterable[int]) -> list[StoredRun]:
    """Every run of the listed jobs, by variant, seed, arm (then id), as stored: three
    statements, however many."""
    ids = {"job_ids": list(job_ids)}
    runs = {row[0]: _run_of(row) for row in driver_rows(session, _RUNS, ids)}
    for row in driver_rows(session, _CURVES, ids):
        _add_curve(runs, row)
    for row in driver_rows(session, _NOTES, ids):
        _add_note(runs, row)
    return list(runs.values())


def _run_of(row: Any) -> StoredRun:
    """A run of its ``_RUNS`` row."""
    return StoredRun(row[0], row[1], row[2], row[3], tuple(row[4:]))


def _add_curve(runs: Mapping[int, StoredRun], row: Any) -> None:
    """A ``_CURVES`` row (with anything after its columns) to its run."""
    run, curve = runs[row[0]], tuple(row[2 : 2 + len(CURVE_FIELDS)])
    run.curves[row[1]] = run.by_metric[row[2]] = curve


def _add_note(runs: Mapping[int, StoredRun], row: Any) -> None:
    """A ``_NOTES`` row (with anything after its columns) to its run."""
    runs[row[0]].notes.append(tuple(row[1 : 1 + len(NOTE_FIELDS)]))


_VERIFIED = IntactRows(most=200_000)  # the runs this process found intact


def verified_runs(session: Session, job_ids: Iterable[int]) -> list[StoredRun]:
    """``stored_runs``, once each is found to be what its checksum was made of;
    ``DamagedRun`` naming the first that is not."""
    return _verified(stored_runs(session, job_ids))


def verified_runs_by_job(session: Session, job_ids: Iterable[int]) -> Iterator[list[StoredRun]]:
    """``verified_runs`` a job at a time, in job id order: three statements whatever the
    number of jobs, their rows streamed, so that one job's runs are held at a time."""
    ids = {"job_ids": list(job_ids)}
    if not ids["job_ids"]:
        return
    curves = JobStream(job_groups(streamed_rows(session, _JOB_CURVES, ids, driver=True), -1))
    notes = JobStream(job_groups(streamed_rows(session, _JOB_NOTES, ids, driver=True), -1))
    for job_id, job_runs in job_groups(streamed_rows(session, _JOB_RUNS, ids, driver=True), 1):
        runs = {row[0]: _run_of(row) for row in job_runs}
        for row in curves.take(job_id) or []:
            _add_curve(runs, row)
        for row in notes.take(job_id) or []:
            _add_note(runs, row)
        yield _verified(list(runs.values()))


def _verified(runs: list[StoredRun]) -> list[StoredRun]:
    for run in runs:
        read = hash((run.job_id, run.job, run.kept, run.columns, *run.curves.items(), *run.notes))
        if read in _VERIFIED:
            continue
        if run.damaged():
            raise run.error()
        _VERIFIED.add(read)
    return runs


def notes_of(runs: Iterable[StoredRun]) -> dict[int, list[RunNote]]:
    """The notes of each run, by run id (a run without any has none)."""
    return {
        run.id: [RunNote(*note[1:]) for note in run.notes]  # type: ignore[arg-type]
        for run in runs
        if run.notes
    }


def checked_runs(session: Session, job_ids: Iterable[int]) -> dict[int, list[RunNote]]:
    """The notes of every run of the listed jobs (``notes_of``), once each run is verified
    (``verified_runs``)."""
    return notes_of(verified_runs(session, job_ids))


def seal_runs(session: Session, job_ids: Iterable[int], only: Iterable[int] | None = None) -> None:
    """Make the checksums of the runs of the listed jobs (``only`` those, when given) of their
    rows as written, in the caller's transaction."""
    kept = None if only is None else set(only)
    sums = [
        {"id": run.id, "checksum": run.checksum()}
        for run in stored_runs(session, job_ids)
        if kept is None or run.id in kept
    ]
    if sums:
        session.execute(update(Run), sums)

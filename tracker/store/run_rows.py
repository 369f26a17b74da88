"""A run's row, its notes and its curves' rows under one checksum (``run.checksum``), written
with them and checked by every read that shows them.

The run's columns (its ``extra`` as the JSON text stored), its notes in position order and its
curve rows (every column but the keys, by metric) are hashed together with its job's name,
seeded with its job's id: a value altered, two arms' names swapped, a note or curve row
deleted or moved, or the run moved to another job, no longer match. Curve points are checked
by their chunks' own checksums (``tracker.store.codec``); what a curve row says of its points
is compared with them by ``tracker db check``.

Migration 0017 keeps its own copy of ``run_checksum``, as an old revision never runs today's
code; `tests/test_migrations.py` checks that an upgraded database holds the checksums an
ingest writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import xxhash
from sqlalchemy import Text, bindparam, select, type_coerce, update
from sqlalchemy.orm import Session

from tracker.errors import DamagedRun
from tracker.jsonio import to_stored_json
from tracker.models import Curve, Job, Run, RunNoteRow
from tracker.notes import RunNote
from tracker.store.raw_rows import plain_rows

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


def _exact(value: object) -> object:
    """A stored value as every backend's driver reads it back: text as it is, a number (a flag
    too: SQLite's driver gives 1 or 0) as its float's repr, which keeps NaN and the
    infinities; -0.0 as 0.0, as SQLite keeps a zero as the integer."""
    if value is None or value.__class__ is str:  # most of a run's: tested first
        return value
    if isinstance(value, str):  # a note's kind, as ingest has it
        return str(value)
    return repr(float(value) + 0.0)  # type: ignore[arg-type]


def run_checksum(
    job_id: int,
    job: str,
    run: Sequence[object],
    curves: Iterable[Sequence[object]],
    notes: Iterable[Sequence[object]],
) -> int:
    """The xxh3-64 (signed, as a BIGINT holds it) of a run as stored: ``run`` its
    ``RUN_FIELDS``, then ``diverged`` and its ``extra`` text; ``curves`` its curve rows'
    ``CURVE_FIELDS`` (any order); ``notes`` its notes' ``NOTE_FIELDS``, in position order."""
    document = [
        job,
        [_exact(value) for value in run],
        sorted([_exact(value) for value in curve] for curve in curves),
        [[_exact(value) for value in note] for note in notes],
    ]
    text = to_stored_json(document).encode("utf-8")
    return int.from_bytes(xxhash.xxh3_64_digest(text, seed=job_id), "big", signed=True)


def orm_checksum(job_id: int, job: str, run: Run) -> int:
    """``run_checksum`` of a run's ORM row, its curves and notes as loaded."""
    return run_checksum(
        job_id,
        job,
        [*(getattr(run, c.key) for c in RUN_FIELDS), run.diverged, stored_extra(run.extra)],
        [[getattr(curve, c.key) for c in CURVE_FIELDS] for curve in run.curves],
        [[getattr(note, c.key) for c in NOTE_FIELDS] for note in run.notes],
    )


def stored_extra(extra: object) -> str:
    """A run's ``extra`` as its column's text (``tracker.models.JSONDocument``)."""
    return to_stored_json(extra, sort_keys=True)


# built once, as every page runs them (tracker.store.catalog says why); every column's value
# as the driver gives it (``plain_rows``)
_RUNS = (
    select(Run.id, Run.job_id, Job.name, Run.checksum, *RUN_FIELDS)
    .add_columns(type_coerce(Run.diverged, Run.seed.type), type_coerce(Run.extra, Text))
    .add_columns(Curve.id, *CURVE_FIELDS)
    .join(Job, Job.id == Run.job_id)
    .outerjoin(Curve, Curve.run_id == Run.id)
    .where(Run.job_id.in_(bindparam("job_ids", expanding=True)))
    .order_by(Run.id)
)
_NOTES = (
    select(RunNoteRow.run_id, *NOTE_FIELDS)
    .join(Run, Run.id == RunNoteRow.run_id)
    .where(Run.job_id.in_(bindparam("job_ids", expanding=True)))
    .order_by(RunNoteRow.run_id, RunNoteRow.position)
)
_CURVE_AT = 4 + len(RUN_FIELDS) + 2  # id, job id, job name, checksum; diverged, extra


@dataclass
class StoredRun:
    """A run's row (``columns``: as ``run_checksum`` takes them), its curve rows (by id) and
    its notes, as stored."""

    id: int
    job_id: int
    job: str
    kept: int | None  # its checksum
    columns: Sequence[object]
    curves: dict[int, Sequence[object]] = field(default_factory=dict)
    notes: list[Sequence[object]] = field(default_factory=list)

    @property
    def arm(self) -> str:
        return str(self.columns[0])

    def checksum(self, numbers: Mapping[int, Mapping[str, object]] | None = None) -> int:
        """Its checksum as made of its rows, with the value columns of the curves in
        ``numbers`` (by id) as given there."""
        curves = [
            [numbers[curve_id].get(c.key, v) for c, v in zip(CURVE_FIELDS, row, strict=True)]
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
    """Every run of the listed jobs, in id order, as stored: two statements, however many."""
    ids = {"job_ids": list(job_ids)}
    notes: dict[int, list[Sequence[object]]] = {}
    for run_id, *note in plain_rows(session, _NOTES, ids):
        notes.setdefault(run_id, []).append(note)
    runs: dict[int, StoredRun] = {}
    for row in plain_rows(session, _RUNS, ids):
        run = runs.get(row[0])
        if run is None:
            run_id, job_id, job, kept = row[:4]
            run = StoredRun(
                run_id, job_id, job, kept, row[4:_CURVE_AT], notes=notes.get(run_id, [])
            )
            runs[run_id] = run
        if row[_CURVE_AT] is not None:  # a run without curves: the outer join's one row
            run.curves[row[_CURVE_AT]] = row[_CURVE_AT + 1 :]
    return list(runs.values())


def checked_runs(session: Session, job_ids: Iterable[int]) -> dict[int, list[RunNote]]:
    """The notes of every run of the listed jobs, by run id (a run without any has none),
    once each run is found to be what its checksum was made of; ``DamagedRun`` naming the
    first (in id order) that is not."""
    found = {}
    for run in stored_runs(session, job_ids):
        if run.damaged():
            raise run.error()
        if run.notes:
            found[run.id] = [RunNote(*note[1:]) for note in run.notes]  # type: ignore[arg-type]
    return found


def write_checksum(
    session: Session, run: StoredRun, numbers: Mapping[int, Mapping[str, object]]
) -> None:
    """A run's checksum made afresh, its curves' value columns as in ``numbers``, in the
    caller's transaction."""
    session.execute(update(Run).where(Run.id == run.id).values(checksum=run.checksum(numbers)))

"""Reading the notes kept with runs (``tracker.notes``: what ingest settled or found)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from tracker.models import RunNoteRow
from tracker.notes import RunNote

SEPARATOR = "; "  # between a run's notes in one cell of a table


# columns, not entities: the notes are read, never changed; built once, as every job page
# runs it (tracker.store.catalog says why)
_NOTES_OF_RUNS = (
    select(
        RunNoteRow.run_id,
        RunNoteRow.kind,
        RunNoteRow.text,
        RunNoteRow.first_step,
        RunNoteRow.last_step,
        RunNoteRow.count,
    )
    .where(RunNoteRow.run_id.in_(bindparam("run_ids", expanding=True)))
    .order_by(RunNoteRow.run_id, RunNoteRow.position)
)


def run_notes(session: Session, run_ids: Iterable[int]) -> dict[int, list[RunNote]]:
    """The notes of each run, in the order ingest wrote them; a run without any has none."""
    rows = session.execute(_NOTES_OF_RUNS, {"run_ids": list(run_ids)})
    notes: dict[int, list[RunNote]] = {}
    for run_id, kind, text, first_step, last_step, count in rows:
        notes.setdefault(run_id, []).append(RunNote(kind, text, first_step, last_step, count))
    return notes


def notes_text(notes: Iterable[RunNote]) -> str:
    """A run's notes in one line, for a table's cell ("" without any)."""
    return SEPARATOR.join(note.text for note in notes)

"""Reading the notes kept with runs (``tracker.notes``: what ingest settled or found)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.models import RunNoteRow
from tracker.notes import RunNote

SEPARATOR = "; "  # between a run's notes in one cell of a table


def run_notes(session: Session, run_ids: Iterable[int]) -> dict[int, list[RunNote]]:
    """The notes of each run, in the order ingest wrote them; a run without any has none."""
    ids = list(run_ids)
    rows = session.execute(  # columns, not entities: the notes are read, never changed
        select(
            RunNoteRow.run_id,
            RunNoteRow.kind,
            RunNoteRow.text,
            RunNoteRow.first_step,
            RunNoteRow.last_step,
            RunNoteRow.count,
        )
        .where(RunNoteRow.run_id.in_(ids))
        .order_by(RunNoteRow.run_id, RunNoteRow.position)
    )
    notes: dict[int, list[RunNote]] = {}
    for run_id, kind, text, first_step, last_step, count in rows:
        notes.setdefault(run_id, []).append(RunNote(kind, text, first_step, last_step, count))
    return notes


def notes_text(notes: Iterable[RunNote]) -> str:
    """A run's notes in one line, for a table's cell ("" without any)."""
    return SEPARATOR.join(note.text for note in notes)

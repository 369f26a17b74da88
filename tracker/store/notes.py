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
    row = RunNoteRow
    rows = session.execute(  # columns, not entities: the notes are read, never changed
        select(row.run_id, row.kind, row.text, row.first_step, row.last_step, row.count)
        .where(row.run_id.in_(ids))
        .order_by(row.run_id, row.position)
    )
    notes: dict[int, list[RunNote]] = {}
    for run_id, kind, text, first_step, last_step, count in rows:
        notes.setdefault(run_id, []).append(RunNote(kind, text, first_step, last_step, count))
    return notes


def notes_text(notes: Iterable[RunNote]) -> str:
    """A run's notes in one line, for a table's cell ("" without any)."""
    return SEPARATOR.join(note.text for note in notes)

"""Showing the notes kept with runs (``tracker.notes``: what ingest settled or found)."""

from __future__ import annotations

from collections.abc import Iterable

from tracker.notes import RunNote

SEPARATOR = "; "  # between a run's notes in one cell of a table


def notes_text(notes: Iterable[RunNote]) -> str:
    """A run's notes in one line, for a table's cell ("" without any)."""
    return SEPARATOR.join(note.text for note in notes)

"""What ingest settled or found in a run's files, kept with the run: its notes.

A note is a kind (a short word a filter can name: ``notes=resumed``), the sentence shown to
people, and where it applies (a step, or a range of steps, and a count). Any part of the
tracker may add a kind of its own: the database keeps the kind as text, so a new one needs
no migration. The kinds ingest writes are listed in ``NoteKind``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class NoteKind(StrEnum):
    """The kinds of note the ingest writes (others may add more: a kind is any short word)."""

    RESUMED = "resumed"  # resumed from a checkpoint: later values replace the earlier ones
    RESTARTED = "restarted"  # started again from the first step: the last run is kept
    DUPLICATE_STEPS = "duplicate_steps"  # the same step logged twice in a row
    INCOMPLETE_LINE = "incomplete_line"  # a last line cut short by a job killed mid-write
    NONFINITE = "nonfinite"  # a stretch of NaN or infinite values
    TIME_BACKWARDS = "time_backwards"  # an elapsed-time column that went backwards
    WALL_TIME = "wall_time"  # which column gives the wall time, where the names leave it unclear
    NO_DATA = "no_data"  # a curve file without data rows
    NO_VAL_LOSS = "no_val_loss"  # a summary without a val_loss


# Notes on the data as logged, not on what reading changed: kept and shown with the run, not
# repeated as warnings of the ingest (a diverged run's NaN tail is its verdict's business).
FINDINGS = frozenset({NoteKind.NONFINITE})


@dataclass(frozen=True)
class RunNote:
    """One note on a run: ``text`` says it in words (``str(note)`` is the text)."""

    kind: str
    text: str
    first_step: int | None = None  # where it starts (a resume's step, a stretch's first)
    last_step: int | None = None  # where a stretch ends
    count: int | None = None  # how many: steps replaced, points, restarts

    def __str__(self) -> str:
        return self.text

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


NOTES_SEPARATOR = "; "  # between a run's notes in one cell of a table


def notes_text(notes: Iterable[RunNote]) -> str:
    """A run's notes in one line, for a table's cell ("" without any)."""
    return NOTES_SEPARATOR.join(note.text for note in notes)

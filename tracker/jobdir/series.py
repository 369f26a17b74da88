"""What a settled curve file shows that a reader should know: stretches of NaN or infinite
values, elapsed-time columns that went backwards (a timer reset, continued forwards where
wall time is drawn: ``tracker.elapsed``) and, where the names leave it unclear, which column
gives the wall time. All are notes; the values stay as logged.
"""

from __future__ import annotations

import csv

import numpy as np
import polars as pl

from tracker.elapsed import (
    Shape,
    TimeColumn,
    TimeKind,
    backward_jumps,
    is_time_column,
    read_as,
    source_line,
)
from tracker.jobdir.logs import plural
from tracker.notes import NoteKind, RunNote

STRETCHES_NAMED = 5  # per column; more are counted in one note
CUT_SHOWN = 65_536  # bytes of a cut line looked at for its step


def series_notes(curves: pl.DataFrame) -> list[RunNote]:
    """The notes of a settled curve frame (``step`` and one Float64 column per metric)."""
    step, *metrics = curves.get_columns()  # one pass over the frame: no lookup per column
    steps = step.to_numpy()
    logged: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for series in metrics:
        present = ~series.is_null().to_numpy()  # null is NaN here: only logged values count
        logged[series.name] = (steps[present], series.to_numpy()[present])
    notes: list[RunNote] = []
    for name, (at, values) in logged.items():
        notes.extend(_nonfinite(name, at, values))
    shapes = {
        name: Shape.of(values) for name, (_, values) in logged.items() if is_time_column(name)
    }
    for name, shape in shapes.items():
        time = read_as(name, shape)
        if time is not None and time.kind is TimeKind.ELAPSED:  # only elapsed time runs forwards
            notes.extend(_backwards(time, *logged[name]))
    line = source_line(shapes)
    if line is not None:
        notes.append(RunNote(NoteKind.WALL_TIME, line))
    return notes


def _nonfinite(column: str, steps: np.ndarray, values: np.ndarray) -> list[RunNote]:
    bad = ~np.isfinite(values)
    if not bad.any():
        return []
    edges = np.diff(np.concatenate(([0], bad.view(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    notes = []
    for start, end in zip(starts[:STRETCHES_NAMED], ends[:STRETCHES_NAMED], strict=True):
        first, last, count = int(steps[start]), int(steps[end - 1]), int(end - start)
        where = f"step {first}" if count == 1 else f"steps {first}-{last}"
        text = f"{column} not finite at {where} ({plural(count, 'point')})"
        notes.append(RunNote(NoteKind.NONFINITE, text, first, last, count))
    if starts.size > STRETCHES_NAMED:
        rest = starts.size - STRETCHES_NAMED
        first, last = int(steps[starts[STRETCHES_NAMED]]), int(steps[ends[-1] - 1])
        points = int(np.sum(ends[STRETCHES_NAMED:] - starts[STRETCHES_NAMED:]))
        stretches = "1 more stretch" if rest == 1 else f"{rest} more stretches"
        text = (
            f"{column} not finite in {stretches} "
            f"between steps {first} and {last} ({plural(points, 'point')})"
        )
        notes.append(RunNote(NoteKind.NONFINITE, text, first, last, points))
    return notes


def _backwards(column: TimeColumn, steps: np.ndarray, values: np.ndarray) -> list[RunNote]:
    jumps = backward_jumps(values)
    if not jumps.size:
        return []
    finite = np.flatnonzero(np.isfinite(values))
    before = finite[np.searchsorted(finite, jumps[0]) - 1]
    first = int(steps[jumps[0]])
    was, now = values[before] / column.per_second, values[jumps[0]] / column.per_second
    text = f"{column.metric} went backwards at step {first} ({was:.4g} s to {now:.4g} s)"
    if jumps.size > 1:
        text += f" and {plural(int(jumps.size) - 1, 'time')} more"
    text += ": drawn continued from where it was"
    return [RunNote(NoteKind.TIME_BACKWARDS, text, first, count=int(jumps.size))]


def incomplete_note(number: int, rest: bytes, header: list[str]) -> RunNote:
    """The note of a last line cut short (line ``number``, ``rest`` the text from its start
    on), named by its line and, when the line got that far, its step."""
    line = rest.split(b"\n", 1)[0].decode("utf-8", "replace")
    fields = next(csv.reader([line]), [])
    position = header.index("step")
    logged = fields[position].strip() if position < len(fields) else ""
    step = int(logged) if logged.isdigit() else None
    where = f"line {number}" if step is None else f"line {number} (step {step})"
    return RunNote(NoteKind.INCOMPLETE_LINE, f"incomplete last {where} dropped", step)

"""Training logs as real runs write them: a last line cut short, resumed runs, steps twice.

A job killed mid-write leaves a last line with fewer fields than the header: it is lost, not
wrong (``tracker.jobdir.curves``); a short line anywhere else is an error.

A step lower than the one before it starts a new stretch: the run was resumed from a
checkpoint, and (as W&B's resume does) the later values replace the earlier ones from that
step on. The same step twice in a row (a validation line logged at a training line's step) is
one step: per column the last value that is not missing wins, so a later empty cell does not
erase an earlier value. ``settle_steps`` gives one row per step, steps strictly increasing,
and notes that say what was replaced or merged. A file holding several runs started again
from its first step (a job relaunched from scratch) says so once, with how often and how many
steps of the earlier runs were dropped.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import polars as pl

from tracker.errors import BadInput
from tracker.notes import NoteKind, RunNote


@dataclass
class _Kept:
    """The rows kept so far of one stretch: ``length`` rows from row ``start``."""

    start: int
    length: int


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _falls(steps: np.ndarray) -> np.ndarray:
    """Where a step is lower than the one before it: compared, not subtracted (the gap from
    -2**63 to 1 overflows an int64 and would read as a fall)."""
    return steps[1:] < steps[:-1]


def _distinct(sorted_steps: np.ndarray) -> int:
    return int(np.count_nonzero(np.diff(sorted_steps))) + 1 if sorted_steps.size else 0


def _resume(steps: np.ndarray) -> tuple[np.ndarray, list[RunNote]]:
    """Which rows survive every resume, and the notes: one per resume, one for all restarts.

    The rows kept are always in step order, so a resume at step r cuts a tail off them: the
    loop runs once per stretch (a few per real run), never once per line.
    """
    starts = np.flatnonzero(_falls(steps)) + 1
    bounds = [0, *starts.tolist(), steps.size]
    kept: list[_Kept] = []
    notes: list[RunNote] = []
    restarts, dropped, restarted_at = 0, 0, 0
    for start, end in pairwise(bounds):
        resumed_at = int(steps[start])
        replaced = 0
        while kept and steps[kept[-1].start] >= resumed_at:
            last = kept.pop()
            replaced += _distinct(steps[last.start : last.start + last.length])
        if kept:
            tail = steps[kept[-1].start : kept[-1].start + kept[-1].length]
            cut = int(np.searchsorted(tail, resumed_at, side="left"))
            replaced += _distinct(tail[cut:])
            kept[-1].length = cut
        if start > 0 and not kept:  # nothing earlier is left: the run started again
            restarts, dropped, restarted_at = restarts + 1, dropped + replaced, resumed_at
        elif start > 0:
            text = f"resumed at step {resumed_at}, {plural(replaced, 'step')} replaced"
            notes.append(RunNote(NoteKind.RESUMED, text, resumed_at, count=replaced))
        kept.append(_Kept(start, end - start))
    if restarts:
        text = (
            f"restarted from step {restarted_at} {_times(restarts)}: the last run kept, "
            f"{plural(dropped, 'earlier step')} dropped"
        )
        notes.insert(0, RunNote(NoteKind.RESTARTED, text, restarted_at, count=dropped))
    mask = np.zeros(steps.size, dtype=bool)
    for stretch in kept:
        mask[stretch.start : stretch.start + stretch.length] = True
    return mask, notes


_TIMES = {1: "once", 2: "twice"}
_NUMBERS = ("three", "four", "five", "six", "seven", "eight", "nine")


def _times(count: int) -> str:
    if count in _TIMES:
        return _TIMES[count]
    return f"{_NUMBERS[count - 3] if count - 3 < len(_NUMBERS) else count} times"


def settle_steps(curves: pl.DataFrame) -> tuple[pl.DataFrame, list[RunNote]]:
    """``curves`` (column ``step`` first, in file order) with one row per step, increasing."""
    steps = curves["step"].to_numpy()
    notes: list[RunNote] = []
    if steps.size > 1 and bool(_falls(steps).any()):
        mask, notes = _resume(steps)
        curves = curves.filter(pl.Series(mask))
    repeated = curves["step"].diff() == 0
    if repeated.any():
        twice = int(curves.filter(repeated)["step"].n_unique())
        text = f"{plural(twice, 'duplicate step')}, last value kept"
        first = int(curves.filter(repeated)["step"][0])
        notes.append(RunNote(NoteKind.DUPLICATE_STEPS, text, first, count=twice))
        curves = _merge_repeated(curves, repeated.fill_null(False))
    return curves, notes


def _merge_repeated(curves: pl.DataFrame, repeated: pl.Series) -> pl.DataFrame:
    """One row per step; only the rows of repeated steps (a few) are grouped."""
    in_group = repeated | repeated.shift(-1, fill_value=False)
    merged = (
        curves.filter(in_group)
        .group_by("step", maintain_order=True)
        .agg(pl.exclude("step").drop_nulls().last())
    )
    return curves.filter(~in_group).merge_sorted(merged, key="step")


def check_quoted_field_counts(
    filename: str, text: Iterable[str], expected: int, allow_short_last: bool
) -> int | None:
    """Every row of ``text`` (the header first) has the header's ``expected`` field count,
    except, with ``allow_short_last``, a shorter last row: the number of its first line is
    returned for the caller to drop it. Quoted fields may hold commas and line breaks."""
    reader = csv.reader(text)
    short: tuple[int, int, int] | None = None  # a short row: its first and last line, fields
    first_line = 1
    try:
        for row in reader:
            if short is not None and row:
                wrong_field_count(filename, short[1], short[2], expected)
            if reader.line_num > 1 and row and len(row) != expected:
                if not allow_short_last or len(row) > expected:
                    wrong_field_count(filename, reader.line_num, len(row), expected)
                short = (first_line + 1, reader.line_num, len(row))
            first_line = reader.line_num
    except csv.Error as exc:
        raise BadInput(path=f"{filename} line {reader.line_num}", problem=str(exc)) from None
    return None if short is None else short[0]


def wrong_field_count(filename: str, line: int, found: int, expected: int) -> None:
    raise BadInput(
        path=f"{filename} line {line}", problem=f"{found} fields, but the header has {expected}"
    )

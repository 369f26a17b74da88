"""An arm's curve CSV, read from a stream in blocks: checked as it arrives, then parsed once.

Each block is checked before the next is read (UTF-8, the header, a field longer than
``CSV_FIELD_MAX``, a line with more fields than the header), so a hostile file is refused
after at most a block past its valid prefix, never after being read whole. The checks are
vectorised per block and the parse handles all columns in single polars expressions: the
work grows with the file's cells, not with cells times columns.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import IO, Any

import numpy as np
import polars as pl

from tracker.domain import LOSS
from tracker.errors import BadInput
from tracker.jobdir.limits import (
    CSV_FIELD_MAX,
    CSV_HEADER_MAX,
    MAX_FILE_SIZE,
    METRIC_COLUMNS_MAX,
    READ_BLOCK,
    size_text,
)
from tracker.jobdir.logs import check_quoted_field_counts, settle_steps, wrong_field_count
from tracker.jobdir.records import missing_columns, name_problem
from tracker.jobdir.series import CUT_SHOWN, incomplete_note, series_notes
from tracker.notes import NoteKind, RunNote

BOM = codecs.BOM_UTF8
NEWLINE, COMMA, QUOTE, SPACE = ord("\n"), ord(","), ord('"'), ord(" ")
# What str.strip() removes, in ASCII: a line of these alone is blank
BLANK = np.zeros(256, dtype=bool)
BLANK[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
QUOTES_AROUND = 2  # a quoted field's run between separators holds its two quote characters


@dataclass
class CurveFile:
    """An arm's CSV as stored (one row per step) and what reading it changed or found."""

    curves: pl.DataFrame
    notes: list[RunNote]


@dataclass
class _Lines:
    """The checks of the lines after the header, carried from block to block."""

    filename: str
    expected: int  # the header's field count
    allow_short_last: bool
    number: int = 2  # of the line being read: the header is line 1
    start: int = 0  # its first byte in the text
    commas: int = 0  # ... and what of it was read so far
    nonblank: bool = False
    run: int = 0  # bytes since the last separator (a field's length, give or take quotes)
    quoted: bool = False  # commas inside quotes separate nothing: the csv module counts
    short: tuple[int, int, int] | None = None  # a short line: its number, fields, first byte

    def check(self, block: np.ndarray, at: int) -> None:
        """Check ``block``, the text's bytes from offset ``at``."""
        newlines = np.flatnonzero(block == NEWLINE)
        self._check_fields(block, newlines)
        if not self.quoted and bool((block == QUOTE).any()):
            self.quoted, self.short = True, None
        if self.quoted:
            self.number += newlines.size
        else:
            self._check_counts(block, newlines, at)

    def _check_fields(self, block: np.ndarray, newlines: np.ndarray) -> None:
        separators = np.flatnonzero((block == COMMA) | (block == NEWLINE))
        if not separators.size:
            self.run += block.size
            longest, where = self.run, block.size
        else:
            runs = np.diff(separators, prepend=-1) - 1
            runs[0] += self.run
            index = int(np.argmax(runs))
            longest, where = int(runs[index]), int(separators[index])
            self.run = block.size - int(separators[-1]) - 1
            if self.run > longest:
                longest, where = self.run, block.size
        if longest > CSV_FIELD_MAX + QUOTES_AROUND:
            line = self.number + int(np.count_nonzero(newlines < where))
            raise BadInput(
                path=f"{self.filename} line {line}",
                problem=f"a field is longer than {CSV_FIELD_MAX} characters",
            )

    def _check_counts(self, block: np.ndarray, newlines: np.ndarray, at: int) -> None:
        # Counted from the positions of commas and blank bytes (few), not by a running sum
        # over every byte: a line's fields are its commas + 1; it is blank if all its bytes are.
        commas = np.flatnonzero(block == COMMA)
        low = np.flatnonzero(block <= SPACE)  # few: blank bytes are all among them
        blanks = low[BLANK[block[low]]]  # line breaks included
        starts = np.concatenate(([0], newlines[:-1] + 1))
        line_commas = np.diff(np.searchsorted(commas, newlines), prepend=0)
        line_blanks = np.searchsorted(blanks, newlines) - np.searchsorted(blanks, starts)
        line_nonblank = newlines - starts > line_blanks
        if newlines.size:
            line_commas[0] += self.commas
            line_nonblank[0] |= self.nonblank
        if self.short is not None and line_nonblank.any():
            self._wrong(self.short)
        bad = np.flatnonzero(line_nonblank & (line_commas + 1 != self.expected))
        if bad.size:
            index = int(bad[0])
            start = self.start if index == 0 else at + int(starts[index])
            self._bad_line(self.number + index, int(line_commas[index]) + 1, start)
            if line_nonblank[index + 1 :].any():
                self._wrong(self.short)
        tail = int(newlines[-1]) + 1 if newlines.size else 0  # the line going on past the block
        tail_commas = commas.size - int(np.searchsorted(commas, tail))
        tail_nonblank = block.size - tail > blanks.size - int(np.searchsorted(blanks, tail))
        if newlines.size:
            self.number += newlines.size
            self.start = at + tail
            self.commas, self.nonblank = tail_commas, tail_nonblank
        else:
            self.commas += tail_commas
            self.nonblank |= tail_nonblank
        if self.nonblank and self.short is not None:
            self._wrong(self.short)
        if self.commas + 1 > self.expected:  # refused before the rest of the line is read
            self._bad_line(self.number, self.commas + 1, self.start)

    def _bad_line(self, number: int, fields: int, start: int) -> None:
        if self.short is not None:
            self._wrong(self.short)
        if fields > self.expected or not self.allow_short_last:
            wrong_field_count(self.filename, number, fields, self.expected)
        self.short = (number, fields, start)

    def _wrong(self, short: tuple[int, int, int] | None) -> None:
        assert short is not None
        wrong_field_count(self.filename, short[0], short[1], self.expected)

    def finish(self) -> None:
        """The last line, when the file does not end with a line break."""
        if not self.quoted and self.nonblank and self.commas + 1 != self.expected:
            self._bad_line(self.number, self.commas + 1, self.start)


class _Blocks:
    """The file's bytes in checked blocks: UTF-8, no BOM, line breaks made ``\\n``."""

    def __init__(self, filename: str, stream: IO[bytes]) -> None:
        self.filename = filename
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.carried_cr = False
        self.first = True
        self.ended = False

    def read(self) -> bytes:
        """The next block; b"" at the end only."""
        while not self.ended:
            block = self._next()
            if block:
                return block
        return b""

    def _next(self) -> bytes:
        """The next block, which a BOM or a line break's "\\n" may have emptied."""
        block = self.stream.read(READ_BLOCK)
        while self.first and block and len(block) < len(BOM):  # the BOM may be cut
            more = self.stream.read(READ_BLOCK)
            if not more:
                break
            block += more
        self.ended = not block
        try:
            self.decoder.decode(block, final=self.ended)  # the text itself is not kept
        except UnicodeDecodeError:
            raise BadInput(path=self.filename, problem="not UTF-8 text") from None
        if self.first and block.startswith(BOM):
            block = block[len(BOM) :]
        self.first = False
        if self.carried_cr and block.startswith(b"\n"):
            block = block[1:]  # the "\r" that ended the last block was a "\r\n"
        self.carried_cr = block.endswith(b"\r")
        return block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def read_curve_stream(
    filename: str,
    stream: IO[bytes],
    size: int,
    strict_steps: bool = False,
    *,
    max_file_size: int = MAX_FILE_SIZE,
) -> CurveFile:
    """Columns ``step`` (Int64, strictly increasing) and one Float64 column per numeric metric.

    Empty cells are missing values (null); ``nan``, ``inf`` and ``-inf`` are values.
    Columns holding only text are not metrics and are dropped. A resumed run, a step logged
    twice in a row and an incomplete last line are settled and noted (``tracker.jobdir.logs``);
    with ``strict_steps`` they are refused, as they once were. ``size`` is the file's size,
    refused past ``max_file_size`` before anything is read.
    """
    check_file_size(filename, size, max_file_size)
    blocks = _Blocks(filename, stream)
    text = io.BytesIO()  # the whole text, checked, for one parse at the end
    first = _read_header(blocks, text)
    header = parse_header(filename, first.decode("utf-8"))
    lines = _Lines(filename, len(header), allow_short_last=not strict_steps)
    at = len(first) + 1
    rest = text.getvalue()[at:]  # read with the header, already in ``text``
    lines.check(np.frombuffer(rest, dtype=np.uint8), at)
    at += len(rest)
    while block := blocks.read():
        lines.check(np.frombuffer(block, dtype=np.uint8), at)
        text.write(block)
        at += len(block)
    lines.finish()
    notes: list[RunNote] = []
    cut = _quoted_cut(filename, text, lines) if lines.quoted else lines.short
    if cut is not None:  # a job killed mid-write: its last line is lost, not wrong
        with text.getbuffer() as view:
            notes.append(incomplete_note(cut[0], bytes(view[cut[2] : cut[2] + CUT_SHOWN]), header))
        text.truncate(cut[2])
    parsed = _parse(filename, text, header)
    if strict_steps:
        step = parsed.frame["step"]
        before = step.shift(1)  # compared, not subtracted: a gap may overflow an int64
        parsed.fail(step == before, "step", "is a duplicate")
        parsed.fail(step < before, "step", "is lower than the step before it")
        frame = parsed.frame
    else:
        frame, settled = settle_steps(parsed.frame)
        notes.extend(settled)
    notes.extend(series_notes(frame))
    if frame.height == 0:
        notes.append(RunNote(NoteKind.NO_DATA, "no data rows"))
    return CurveFile(frame, notes)


def check_file_size(filename: str, size: int, max_file_size: int) -> None:
    """Refuse a file past ``max_file_size`` by its size alone, before reading it."""
    if size > max_file_size:
        raise BadInput(
            path=filename,
            problem=f"{size} bytes, more than --max-file-size ({size_text(max_file_size)})",
        )


def _read_header(blocks: _Blocks, text: io.BytesIO) -> bytes:
    """The header line's bytes, reading no more than ``CSV_HEADER_MAX`` past its start for
    it; ``text`` holds every byte read."""
    while True:
        block = blocks.read()
        text.write(block)
        seen = text.getvalue()
        end = seen.find(b"\n", 0, CSV_HEADER_MAX + 1)
        first = seen if end < 0 else seen[:end]
        if not first.decode("utf-8", "replace").strip():
            if end >= 0 and seen.decode("utf-8", "replace").strip():
                break  # a blank first line, then content: parse_header says so
            if not block:
                raise BadInput(path=blocks.filename, problem="empty file")
            if len(seen) > CSV_HEADER_MAX:
                break
            continue
        if end >= 0 or not block:
            return first
        if len(seen) > CSV_HEADER_MAX:
            raise BadInput(
                path=f"{blocks.filename} line 1",
                problem=f"the header is longer than {size_text(CSV_HEADER_MAX)}",
            )
    raise BadInput(path=f"{blocks.filename} line 1", problem="empty: the first line is the header")


def _quoted_cut(filename: str, text: io.BytesIO, lines: _Lines) -> tuple[int, int, int] | None:
    """The csv module's count of a quoted file's fields; the short last row to cut, if any."""
    text.seek(0)
    wrapper = io.TextIOWrapper(text, encoding="utf-8", newline="")
    try:
        number = check_quoted_field_counts(
            filename, wrapper, lines.expected, lines.allow_short_last
        )
    finally:
        wrapper.detach()  # the text stays open for the parse
    if number is None:
        return None
    view = np.frombuffer(text.getbuffer(), dtype=np.uint8)
    end = int(np.flatnonzero(view == NEWLINE)[number - 2]) + 1
    del view
    return number, 0, end


def parse_header(filename: str, first: str) -> list[str]:
    """The header's column names, checked: ``step`` and ``loss``, unique storable names."""
    if not first.strip():
        raise BadInput(path=f"{filename} line 1", problem="empty: the first line is the header")
    try:
        header = [name.strip() for name in next(csv.reader([first]))]
    except csv.Error as exc:
        raise BadInput(path=f"{filename} line 1", problem=f"malformed CSV header: {exc}") from None
    metrics = len(header) - ("step" in header)
    if metrics > METRIC_COLUMNS_MAX:
        raise BadInput(
            path=filename,
            problem=f"{metrics} metric columns, more than the {METRIC_COLUMNS_MAX} a job may have",
        )
    if "step" not in header or LOSS not in header:
        raise BadInput(path=filename, problem=missing_columns(header))
    for position, name in enumerate(header, start=1):
        if not name:
            raise BadInput(path=filename, problem=f"column {position} of the header has no name")
        problem = name_problem(name, f"column {name!r:.60}")
        if problem:
            raise BadInput(path=filename, problem=problem)
    counts = Counter(header)
    twice = next((name for name in header if counts[name] > 1), None)
    if twice is not None:
        raise BadInput(path=filename, problem=f"column {twice!r} appears twice in the header")
    return header


@dataclass
class _Parsed:
    frame: pl.DataFrame
    fail: Any


def _parse(filename: str, text: io.BytesIO, header: list[str]) -> _Parsed:
    line = "#line"  # the row index: a name no header column can take
    while line in header:
        line += "#"
    text.seek(0)
    try:
        raw = pl.read_csv(text, infer_schema=False, new_columns=header)
    except pl.exceptions.PolarsError as exc:
        first = str(exc).strip().splitlines()[0]
        raise BadInput(path=filename, problem=f"malformed CSV: {first}") from None
    del text
    raw = raw.with_columns(pl.all().str.strip_chars()).with_row_index(line, offset=2)
    raw = raw.filter(~pl.all_horizontal(pl.exclude(line).is_null() | (pl.exclude(line) == "")))
    fail = partial(_fail_on_first, filename, raw, line)
    return _Parsed(_metric_columns(raw, header, fail), fail)


def _metric_columns(raw: pl.DataFrame, header: list[str], fail: Any) -> pl.DataFrame:
    """``step`` as integers and every numeric column as floats, in file order; the counts of
    all columns come from one select, so the work is linear in the cells."""
    steps = raw["step"].cast(pl.Int64, strict=False)
    fail(raw["step"].is_null(), "step", "is empty")
    fail(steps.is_null(), "step", "is not an integer")
    names = [name for name in header if name != "step"]
    present = [pl.col(name).is_not_null() & (pl.col(name) != "") for name in names]
    unparsed = [
        is_present & pl.col(name).cast(pl.Float64, strict=False).is_null()
        for name, is_present in zip(names, present, strict=True)
    ]
    counts = raw.select(
        *(is_present.sum().alias(f"p{i}") for i, is_present in enumerate(present)),
        *(bad.sum().alias(f"u{i}") for i, bad in enumerate(unparsed)),
    ).row(0)
    kept = []
    for index, name in enumerate(names):
        n_present, n_unparsed = counts[index], counts[len(names) + index]
        if name != LOSS and n_present and n_unparsed == n_present:
            continue  # a text column (a phase name, a timestamp): not a metric
        if n_unparsed:
            fail(raw.select(unparsed[index]).to_series(), name, "is not a number")
        kept.append(name)
    return raw.select(
        steps.alias("step"), *(pl.col(name).cast(pl.Float64, strict=False) for name in kept)
    )


def _fail_on_first(
    filename: str, raw: pl.DataFrame, line: str, bad: pl.Series, column: str, problem: str
) -> None:
    if bad.any():
        row = raw.filter(bad).row(0, named=True)
        shown = f" {row[column]!r:.60}" if row[column] else ""
        raise BadInput(path=f"{filename} line {row[line]}", problem=f"{column}{shown} {problem}")

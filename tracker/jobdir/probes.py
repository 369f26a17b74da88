"""Probe files read from a stream: ``mem_sweep.json`` (a JSON list) and ``*.jsonl`` lines.

Records are decoded one at a time from blocks of the file and counted as they come, so a file
of more than ``PROBE_RECORDS_MAX`` records is refused when the one too many arrives, and a
broken one after at most a record past its valid prefix; the messages name the line and
column in the whole file, as a parse of the whole text would.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import IO, Any

from tracker.errors import BadInput
from tracker.jobdir.limits import (
    ARM_SUMMARY_MAX,
    PROBE_RECORD_MAX,
    PROBE_RECORDS_MAX,
    READ_BLOCK,
    size_text,
)
from tracker.jobdir.records import ProbeRecord, parse_probe_record

JSON_SPACE = re.compile(r"[ \t\n\r]*")
# Past a value's end or an error, this much more text settles it: -Infinity, the longest
# token but strings and numbers, has 9 characters, and a number cut short is noticed by then.
LONGEST_OTHER_TOKEN = 16


class _Text:
    """The file's text, decoded block by block; what was consumed is dropped, its line and
    column kept for messages."""

    def __init__(self, filename: str, stream: IO[bytes]) -> None:
        self.filename = filename
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.text = ""
        self.pos = 0
        self.ended = False
        self.dropped = 0  # characters dropped before ``text``
        self.dropped_lines = 0
        self.last_newline = -1  # where the last dropped line break was, in the whole text

    def more(self) -> bool:
        """Read a block more; False at the end of the file."""
        if self.ended:
            return False
        block = self.stream.read(READ_BLOCK)
        self.ended = not block
        try:
            self.text += self.decoder.decode(block, final=self.ended)
        except UnicodeDecodeError:
            raise BadInput(path=self.filename, problem="not UTF-8 text") from None
        return not self.ended

    def drop_consumed(self) -> None:
        if self.pos < READ_BLOCK:
            return
        newline = self.text.rfind("\n", 0, self.pos)
        if newline >= 0:
            self.last_newline = self.dropped + newline
        self.dropped_lines += self.text.count("\n", 0, self.pos)
        self.dropped += self.pos
        self.text, self.pos = self.text[self.pos :], 0

    def skip_space(self) -> None:
        """Past JSON white space, reading on until something else or the end."""
        while True:
            self.pos = JSON_SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.text) or not self.more():
                return

    def next_char(self) -> str:
        self.skip_space()
        return self.text[self.pos : self.pos + 1]

    def malformed(self, pos: int, message: str) -> BadInput:
        """The error of a parse of the whole text at ``pos`` of ``text``."""
        line = self.dropped_lines + self.text.count("\n", 0, pos) + 1
        newline = self.text.rfind("\n", 0, pos)
        column = pos - newline if newline >= 0 else self.dropped + pos - self.last_newline
        return BadInput(
            path=self.filename, problem=f"malformed JSON (line {line}, column {column}): {message}"
        )


def read_probe_stream(filename: str, stream: IO[bytes]) -> list[ProbeRecord]:
    """Probe records from ``mem_sweep.json`` (a JSON list) or a ``*.jsonl`` file."""
    if filename.endswith(".jsonl"):
        return _read_lines(filename, stream)
    text = _Text(filename, stream)
    if text.next_char() != "[":
        _single_value(text)
        raise BadInput(path=filename, problem="expected a JSON list of probe records")
    text.pos += 1
    return [  # validated once the whole list is read: a malformed file says so first
        parse_probe_record(record, f"{filename} record {index}")
        for index, record in enumerate(_list_items(text), start=1)
    ]


def read_json_stream(filename: str, stream: IO[bytes]) -> Any:
    """A file of one JSON value (an arm's summary), of at most ``ARM_SUMMARY_MAX``."""
    return _single_value(_Text(filename, stream), ARM_SUMMARY_MAX)


def _single_value(text: _Text, limit: int = PROBE_RECORD_MAX) -> Any:
    """The file's one value, with the messages of a parse of the whole file (empty, malformed,
    extra data), reading no more than a record may hold past where it goes wrong."""
    while not text.text.strip() and len(text.text) <= PROBE_RECORD_MAX and text.more():
        pass  # other white space than JSON's (U+00A0): the file is as empty
    if not text.text.strip():
        raise BadInput(path=text.filename, problem="empty file")
    value = _decode_item(json.JSONDecoder(), text, text.filename, limit)
    if text.next_char():
        raise text.malformed(text.pos, "Extra data")
    return value


def _list_items(text: _Text) -> list[Any]:
    """The list's elements, decoded one at a time; the list's ``[`` is consumed."""
    decoder = json.JSONDecoder()
    items: list[Any] = []
    if text.next_char() == "]":
        text.pos += 1
    else:
        while True:
            items.append(_decode_item(decoder, text, f"{text.filename} record {len(items) + 1}"))
            if len(items) > PROBE_RECORDS_MAX:
                raise BadInput(
                    path=text.filename, problem=f"more than {PROBE_RECORDS_MAX} probe records"
                )
            following = text.next_char()
            if following == "]":
                text.pos += 1
                break
            if following != ",":
                raise text.malformed(text.pos, "Expecting ',' delimiter")
            text.pos += 1
            text.drop_consumed()
    if text.next_char():
        raise text.malformed(text.pos, "Extra data")
    return items


def _decode_item(
    decoder: json.JSONDecoder, text: _Text, where: str, limit: int = PROBE_RECORD_MAX
) -> Any:
    """One value of at most ``limit`` characters, reading on while it may be cut short by
    the end of what was read."""
    text.skip_space()
    start = text.pos
    too_long = BadInput(path=where, problem=f"longer than {size_text(limit)}")
    while True:
        try:
            item, end = decoder.raw_decode(text.text, start)
        except json.JSONDecodeError as exc:
            after = len(text.text) - exc.pos
            # Only a string, or a token ending within a few characters of what was read,
            # may be cut short: any other error stands whatever follows.
            cut = exc.msg.startswith("Unterminated string") or after <= LONGEST_OTHER_TOKEN
            if text.ended or not cut or after > limit:
                # a string still open past the limit is a record too long, not a malformed one
                if exc.pos - start > limit or (cut and len(text.text) - start > limit):
                    raise too_long from None
                raise text.malformed(exc.pos, exc.msg) from None
            if len(text.text) - start > 2 * limit + READ_BLOCK:
                raise too_long from None
            text.more()
            continue
        except RecursionError:
            raise BadInput(
                path=text.filename, problem="malformed JSON: nested too deeply"
            ) from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise BadInput(path=text.filename, problem=f"malformed JSON: {exc}") from None
        if end - start > limit:
            raise too_long
        # a number near the end of what was read may go on ("1" of "1.5e3")
        if len(text.text) - end > LONGEST_OTHER_TOKEN or text.ended:
            text.pos = end
            return item
        text.more()


def _read_lines(filename: str, stream: IO[bytes]) -> list[ProbeRecord]:
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    records: list[ProbeRecord] = []
    pending = ""
    number = 0
    ended = False
    while not ended:
        block = stream.read(READ_BLOCK)
        ended = not block
        try:
            pending += decoder.decode(block, final=ended)
        except UnicodeDecodeError:
            raise BadInput(path=filename, problem="not UTF-8 text") from None
        # JSON lines end at "\n" only: str.splitlines would also cut at U+2028 inside strings
        lines = pending.split("\n")
        pending = "" if ended else lines.pop()
        if len(pending) > PROBE_RECORD_MAX:
            where = f"{filename} line {number + len(lines) + 1}"
            raise BadInput(path=where, problem=f"longer than {size_text(PROBE_RECORD_MAX)}")
        for line in lines:
            number += 1
            if not line.strip():
                continue
            where = f"{filename} line {number}"
            records.append(parse_probe_record(load_json(where, line, one_line=True), where))
            if len(records) > PROBE_RECORDS_MAX:
                raise BadInput(
                    path=filename, problem=f"more than {PROBE_RECORDS_MAX} probe records"
                )
    return records


def load_json(where: str, text: str, *, one_line: bool = False) -> Any:
    """A whole JSON document; every problem is a one-line ``BadInput``."""
    if not text.strip():
        raise BadInput(path=where, problem="empty file")
    try:
        return json.loads(text)  # accepts NaN and Infinity, as Python's json.dump writes them
    except json.JSONDecodeError as exc:
        place = f"column {exc.colno}" if one_line else f"line {exc.lineno}, column {exc.colno}"
        raise BadInput(path=where, problem=f"malformed JSON ({place}): {exc.msg}") from None
    except RecursionError:
        raise BadInput(path=where, problem="malformed JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise BadInput(path=where, problem=f"malformed JSON: {exc}") from None

"""Verdict keys: what a job's verdict shares with the same verdict of other jobs, stored once
(``VerdictKey``), and the figures that are its own (``JobVerdicts.figures``).

A detail's decimal numbers (``4.024``, not the ``124`` of ``gpt-124m`` nor a count) are what
differ from job to job: the key keeps the detail with each replaced by ``PLACEHOLDER``, the
verdict the numbers as written, packed two characters a byte (digits, the point and the
separator), so that ``detail`` rebuilds it byte for byte. A detail that holds the placeholder
itself is kept whole in its key.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Sequence
from functools import lru_cache

from sqlalchemy import Insert, delete, select, text, update
from sqlalchemy.orm import Session

from tracker.jsonio import to_stored_json
from tracker.models import JobVerdicts, VerdictKey
from tracker.store.raw_rows import streamed_rows, table_of
from tracker.store.value_lists import among

PLACEHOLDER = "\x1f"
NUMBER = re.compile(r"(?<![\w.])[0-9]+\.[0-9]+(?!\w|\.[0-9])")  # ASCII: \d matches any digit
_ALPHABET = "0123456789. "  # a number's characters, then the separator; 15 pads the last byte
_PAD = 15
_SYMBOLS = [*_ALPHABET, "", "", "", ""]  # 12-14 never written: damage, which the checksum finds
# a byte's text from its two hex digits (high, low): every page reading verdicts rebuilds them
_FROM_HEX = str.maketrans({f"{code:x}": _SYMBOLS[code] or None for code in range(16)})

Key = tuple[str, str, float | None, str, str | None, str]  # as COLUMNS
COLUMNS = ("check", "subject", "expected", "status", "known", "detail_template")
KEYS = table_of(VerdictKey)


def split_detail(detail: str) -> tuple[str, bytes | None]:
    """``detail``'s template and its packed figures (None: it has none)."""
    if PLACEHOLDER in detail:
        return detail, None
    numbers = NUMBER.findall(detail)
    if not numbers:
        return detail, None
    codes = [_ALPHABET.index(c) for c in " ".join(numbers)]
    codes += [_PAD] * (len(codes) % 2)
    packed = bytes(high << 4 | low for high, low in zip(codes[::2], codes[1::2], strict=True))
    return NUMBER.sub(PLACEHOLDER, detail), packed


def detail(template: str, figures: bytes | None) -> str:
    """The detail that ``split_detail`` made ``template`` and ``figures`` of."""
    if figures is None:
        return template
    numbers = figures.hex().translate(_FROM_HEX).split(" ")
    parts = _parts(template)
    if len(numbers) == len(parts) - 1:  # as written: a figure between each two parts
        text = [*parts, *parts[1:]]  # a list of the right length, then each in its place
        text[::2], text[1::2] = parts, numbers
        return "".join(text)
    return "".join(part + number for part, number in zip(parts, numbers, strict=False)) + parts[-1]


@lru_cache(maxsize=4096)
def _parts(template: str) -> tuple[str, ...]:
    """A template's text around its placeholders (templates repeat across jobs: a few hundred)."""
    return tuple(template.split(PLACEHOLDER))


def key_digest(key: Key) -> bytes:
    """The 128 bits of SHA-256 naming ``key`` (its expected value by its repr: every bit)."""
    check, subject, expected, status, known, template = key
    document = [check, subject, None if expected is None else repr(expected), status, known]
    return hashlib.sha256(to_stored_json([*document, template]).encode("utf-8")).digest()[:16]


def key_ids(session: Session, keys: Sequence[Key]) -> dict[Key, int]:
    """The ids of ``keys``, inserting those not stored yet; a key another transaction inserts
    at the same time is left to it (``ON CONFLICT DO NOTHING``), then read back. A stored key
    whose columns are no longer those of its digest is rewritten: rebuilding a job's rows
    (``db check --repair``) so repairs the key of every job that uses it."""
    digests = {key: key_digest(key) for key in dict.fromkeys(keys)}
    if not digests:
        return {}
    rows = [
        {"digest": digest, **dict(zip(COLUMNS, key, strict=True))}
        for key, digest in digests.items()
    ]
    # imported here: the PostgreSQL dialects cost a command on SQLite ~20 ms to import
    adding: Insert
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        adding = postgresql_insert(KEYS).on_conflict_do_nothing(index_elements=["digest"])
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        adding = sqlite_insert(KEYS).on_conflict_do_nothing(index_elements=["digest"])
    session.execute(adding, rows)
    wanted = {digest: key for key, digest in digests.items()}
    query = select(VerdictKey.id, VerdictKey.digest, *(KEYS.c[c] for c in COLUMNS))
    found: dict[bytes, int] = {}
    for key_id, stored_digest, *stored in session.execute(
        query.where(VerdictKey.digest.in_(wanted))
    ):
        digest = bytes(stored_digest)
        found[digest] = key_id
        if key_digest(tuple(stored)) != digest:  # type: ignore[arg-type]
            values = dict(zip(COLUMNS, wanted[digest], strict=True))  # damaged: made right
            session.execute(update(VerdictKey).where(VerdictKey.id == key_id).values(values))
    return {key: found[digest] for key, digest in digests.items()}


def sweep_keys(session: Session) -> None:
    """Delete the keys no verdict uses any more (after jobs were deleted or rederived).

    On PostgreSQL it first waits for the writers that took keys (``key_ids`` inserts: a lock
    this one conflicts with) to commit, so that it sees the verdicts using them: a key read
    by an ingest under way is not deleted from under it. SQLite has one writer at a time."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE verdict_key IN SHARE ROW EXCLUSIVE MODE"))
    used: set[int] = set()
    for (ids,) in streamed_rows(session, select(JobVerdicts.keys), driver=True):  # ~400 B a row
        used.update(struct.unpack(f"<{len(ids) // 4}i", ids))  # JobVerdicts.keys: int32s
    unused = [key_id for (key_id,) in session.execute(select(VerdictKey.id)) if key_id not in used]
    if unused:
        session.execute(delete(VerdictKey).where(among(VerdictKey.id, unused)))

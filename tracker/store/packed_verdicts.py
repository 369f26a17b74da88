"""A job's kept verdicts packed as columns, one row a job (``JobVerdicts``), and read back as
columns (``VerdictColumns``) for any number of jobs, each job's checked against its checksum.

A job's checksum (``JobSummary.rows_checksum``) is the xxh3-64, seeded with its id, of the
expectations digest its rows were judged against, the digests of its verdicts' keys in
position order (a key's digest names every column of it), its packed columns as stored and
its numbers: rows moved to another job, a byte of them altered or a key no longer the one
they were written with, no longer match. Made of bytes, not of each verdict's text, so that
checking a million verdicts costs what hashing their 30 MB does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xxhash
from numpy.typing import NDArray
from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.errors import DamagedVerdicts
from tracker.jsonio import to_stored_json
from tracker.models import Job, JobNumber, JobSummary, JobVerdicts, VerdictKey
from tracker.store.raw_rows import JobStream, driver_rows, job_groups, plain_rows, streamed_rows
from tracker.store.value_lists import among
from tracker.store.verdict_columns import VerdictColumns
from tracker.store.verdict_keys import COLUMNS, Key, key_digest

KEY_ID = np.dtype("<i4")
FLOAT = np.dtype("<f8")
END = np.dtype("<i4")
DIGEST = 16  # bytes of a key's digest
ABSENT_MEASURED, ABSENT_TOLERANCE, ABSENT_FIGURES = 1, 2, 4
PACKED = ("keys", "measured", "tolerance", "absent", "figure_ends", "figures")  # as stored
JobNumbers = dict[int, dict[str, float | None]]  # a job's numbers by name, by job id
# Rows of many jobs handed on as columns at once: a few MB of arrays.
COLUMN_BATCH_ROWS = 50_000
# Up to this many jobs, their keys are read after their verdicts, those they use alone; more,
# and every key is read first (a few thousand rows), so the verdicts stream in one statement.
FEW_JOBS = 200


def pack(
    key_ids: Sequence[int],
    measured: Sequence[float | None],
    tolerance: Sequence[float | None],
    figures: Sequence[bytes | None],
) -> dict[str, bytes]:
    """A job's verdicts (in position order) as the ``PACKED`` columns of its ``JobVerdicts``
    row."""
    absent = [
        (m is None) * ABSENT_MEASURED
        + (t is None) * ABSENT_TOLERANCE
        + (f is None) * ABSENT_FIGURES
        for m, t, f in zip(measured, tolerance, figures, strict=True)
    ]
    ends = np.cumsum([len(f or b"") for f in figures], dtype=np.int64)
    return {
        "keys": np.array(key_ids, dtype=KEY_ID).tobytes(),
        "measured": _floats(measured),
        "tolerance": _floats(tolerance),
        "absent": bytes(absent),
        "figure_ends": ends.astype(END).tobytes(),
        "figures": b"".join(f or b"" for f in figures),
    }


def _floats(values: Sequence[float | None]) -> bytes:
    return np.array([np.nan if v is None else v for v in values], dtype=FLOAT).tobytes()


def rows_checksum(
    job_id: int,
    digest: str,
    key_digests: bytes,
    packed: Sequence[bytes],
    numbers: Mapping[str, float | None],
) -> int:
    """The xxh3-64 (signed, as a BIGINT holds it) of a job's kept rows, seeded with its id:
    ``digest``, its keys' digests in position order, its ``PACKED`` columns but the keys' ids
    (each database's own: a copy numbers them anew) and its numbers (each as its float's repr),
    every part after its length."""
    named = sorted(
        (name, None if v is None else repr(float(v) + 0.0)) for name, v in numbers.items()
    )
    parts = (digest.encode(), key_digests, *packed[1:], to_stored_json(named).encode())
    # hashed at once: the same bytes as a part at a time, a tenth of the calls
    data = b"".join(len(part).to_bytes(8, "little") + part for part in parts)
    found = xxhash.xxh3_64_intdigest(data, seed=job_id)
    return found - (1 << 64) if found >= 1 << 63 else found


@dataclass(frozen=True)
class _Keys:
    """Verdict keys as read: their columns (``rows``), where each key id is among them
    (``at``, -1: none), their 16-byte digests and whether their columns still are those of
    their digest (``intact``)."""

    rows: list[Key]
    at: NDArray[np.intp]
    digests: NDArray[np.uint8]
    intact: NDArray[np.bool_]

    def positions(self, ids: NDArray[np.int32]) -> NDArray[np.intp] | None:
        """Where the keys ``ids`` are among ``rows``; None if one is missing or damaged."""
        if ids.size and (ids.min() < 0 or ids.max() >= self.at.size):
            return None
        at = self.at[ids]
        return at if bool((at >= 0).all() and self.intact[at].all()) else None


def _keys(session: Session, ids: Sequence[int] | None = None) -> _Keys:
    """The keys ``ids`` (None: every key), each checked against its digest."""
    query = select(VerdictKey.id, VerdictKey.digest, *(getattr(VerdictKey, c) for c in COLUMNS))
    if ids is not None:
        query = query.where(among(VerdictKey.id, list(ids)))
    stored = plain_rows(session, query)
    rows: list[Key] = [tuple(row[2:]) for row in stored]
    top = max((row[0] for row in stored), default=-1)
    at = np.full(top + 1, -1, dtype=np.intp)
    at[[row[0] for row in stored]] = np.arange(len(stored))
    digests = np.frombuffer(b"".join(bytes(row[1]) for row in stored), dtype=np.uint8)
    intact = np.array(
        [key_digest(key) == bytes(row[1]) for key, row in zip(rows, stored, strict=True)],
        dtype=np.bool_,
    )
    return _Keys(rows, at, digests.reshape(-1, DIGEST), intact)


def _key_ids(packed: bytes) -> NDArray[np.int32]:
    """A job's packed key ids (none if they are not a whole number of them: damage, which
    its checksum check then finds)."""
    whole = len(packed) - len(packed) % KEY_ID.itemsize
    return np.frombuffer(packed, KEY_ID, count=whole // KEY_ID.itemsize)


_VERDICTS = select(JobVerdicts.job_id, *(getattr(JobVerdicts, c) for c in PACKED))


def kept_columns(
    session: Session, job_ids: list[int], digest: str
) -> Iterator[tuple[VerdictColumns, JobNumbers]]:
    """The verdict rows and numbers stored for ``digest`` of the listed jobs that have them
    (and their checksum: rows kept before it are as none), as columns in batches of whole jobs
    of about ``COLUMN_BATCH_ROWS`` rows, in job id order; ``DamagedVerdicts`` when a job's
    rows are not those its checksum was made of. Four statements whatever the number of
    jobs, the rows streamed."""
    if not job_ids:
        return
    verdicts = _VERDICTS.where(among(JobVerdicts.job_id, job_ids)).order_by(JobVerdicts.job_id)
    if len(job_ids) <= FEW_JOBS:
        read = driver_rows(session, verdicts)
        used = set().union(*(_key_ids(row[1]).tolist() for row in read))
        keys = _keys(session, sorted(used))
        stream: Iterator[Sequence[object]] = iter(read)
    else:
        keys = _keys(session)
        stream = streamed_rows(session, verdicts, driver=True)  # about 4 KB a row
    # apart from the numbers: on SQLite the checksum sits past the summary's overflow pages
    checksums: dict[int, int | None] = dict(
        plain_rows(
            session,
            select(JobSummary.job_id, JobSummary.rows_checksum).where(
                among(JobSummary.job_id, job_ids), JobSummary.expectations == digest
            ),
        )
    )
    numbers = (
        select(JobNumber.job_id, JobNumber.name, JobNumber.value)
        .where(among(JobNumber.job_id, job_ids), JobNumber.expectations == digest)
        .order_by(JobNumber.job_id)
    )
    by_job = JobStream((int(row[0]), row[1:]) for row in stream)  # type: ignore[call-overload]
    batch = _Batch(keys.rows)
    for job_id, listed in job_groups(streamed_rows(session, numbers), 0):
        own: dict[str, float | None] = {name: value for _, name, value in listed}
        kept = checksums.get(job_id)
        # a job's verdicts without numbers are not ``digest``'s: passed over
        packed = by_job.take(job_id)
        if kept is None:  # kept before rows had a checksum: analysed afresh, as if none
            continue
        batch.add(job_id, own, kept, packed)
        if len(batch) >= COLUMN_BATCH_ROWS:
            yield batch.columns(session, digest, keys)
            batch = _Batch(keys.rows)
    if batch.numbers:
        yield batch.columns(session, digest, keys)


EMPTY = (b"",) * len(PACKED)


@dataclass(frozen=True)
class _Stored:
    """A job's rows as read, not yet checked: its numbers, checksum and packed columns."""

    job_id: int
    numbers: Mapping[str, float | None]
    kept: int
    columns: list[bytes]

    @property
    def count(self) -> int:
        """Its verdicts: whole key ids (a part of one is damage, which its checksum finds)."""
        return len(self.columns[0]) // KEY_ID.itemsize


def _checked(
    session: Session, digest: str, keys: _Keys, jobs: Sequence[_Stored]
) -> NDArray[np.intp]:
    """Where the jobs' keys are among ``keys``, one job's after another's, if every job's
    checksum holds; else ``DamagedVerdicts`` naming the first job whose does not. The keys of
    all the jobs are looked up at once (a lookup a job cost more than the hashing)."""
    ids = [_key_ids(job.columns[0]) for job in jobs]
    every = keys.positions(np.concatenate(ids)) if ids else np.zeros(0, np.intp)
    digests = b"" if every is None else keys.digests[every].tobytes()
    end = 0
    for job, own in zip(jobs, ids, strict=True):
        start, end = end, end + len(own)
        if every is not None:
            at: NDArray[np.intp] | None = every[start:end]
            key_digests = digests[start * DIGEST : end * DIGEST]
        else:  # some job's keys are missing or damaged: this one's?
            at = keys.positions(own)
            key_digests = b"" if at is None else keys.digests[at].tobytes()
        whole = len(job.columns[0]) % KEY_ID.itemsize == 0
        if (
            not whole
            or at is None
            or rows_checksum(job.job_id, digest, key_digests, job.columns, job.numbers) != job.kept
        ):
            name = session.scalar(select(Job.name).where(Job.id == job.job_id))
            raise DamagedVerdicts(job=name, difference="checksum mismatch")
    assert every is not None  # else a job's keys were missing, and it was named above
    return every


class _Batch:
    """Jobs' columns, checked and gathered into one ``VerdictColumns``."""

    def __init__(self, key_rows: list[Key]) -> None:
        self.key_rows = key_rows
        self.numbers: JobNumbers = {}
        self._jobs: list[_Stored] = []
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(
        self,
        job_id: int,
        numbers: dict[str, float | None],
        kept: int,
        packed: Sequence[object] | None,
    ) -> None:
        stored = [bytes(part) for part in (packed or EMPTY)]  # type: ignore[call-overload]
        self.numbers[job_id] = numbers
        self._jobs.append(_Stored(job_id, numbers, kept, stored))
        self._rows += self._jobs[-1].count

    def columns(
        self, session: Session, digest: str, stored_keys: _Keys
    ) -> tuple[VerdictColumns, JobNumbers]:
        """The batch's columns, every job's checked first (``_checked``)."""
        keys = _checked(session, digest, stored_keys, self._jobs)
        jobs = self._jobs
        count = [job.count for job in jobs]
        stored = [job.columns for job in jobs]
        absent = np.frombuffer(b"".join(s[3] for s in stored), dtype=np.uint8)
        offsets = np.cumsum([0, *(len(s[5]) for s in stored[:-1])])
        ends = [
            np.frombuffer(s[4], END).astype(np.int64) + offset
            for s, offset in zip(stored, offsets.tolist(), strict=True)
        ]
        columns = VerdictColumns(
            job_ids=np.repeat(np.array([job.job_id for job in jobs], np.int64), count),
            keys=keys,
            measured=np.frombuffer(b"".join(s[1] for s in stored), FLOAT).astype(np.float64),
            has_measured=(absent & ABSENT_MEASURED) == 0,
            tolerance=np.frombuffer(b"".join(s[2] for s in stored), FLOAT).astype(np.float64),
            has_tolerance=(absent & ABSENT_TOLERANCE) == 0,
            figure_ends=np.concatenate(ends) if ends else np.zeros(0, np.int64),
            has_figures=(absent & ABSENT_FIGURES) == 0,
            figures=b"".join(s[5] for s in stored),
            key_rows=self.key_rows,
        )
        return columns, self.numbers

"""Per-job index rows (``JobIndex``): the counts of a job's kept verdicts of each status and
its smoothed curves, written with its other derived rows (``tracker.store.kept_rows``) and read
for many jobs at once by the index and the runs table, which then read no verdict and no
summary. The counts carry a checksum, checked on every read (as the verdicts' own)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import xxhash
from sqlalchemy import Select, bindparam, insert, select
from sqlalchemy.orm import Session

from tracker.domain import Status
from tracker.errors import DamagedVerdicts
from tracker.jsonio import to_stored_json
from tracker.models import Job, JobIndex
from tracker.store.raw_rows import IntactRows, driver_rows
from tracker.store.value_lists import among

COLUMNS = {  # status -> its count's column
    Status.PASS: JobIndex.passed,
    Status.FAIL: JobIndex.failed,
    Status.KNOWN: JobIndex.known,
    Status.NA: JobIndex.not_applicable,
}


def counts_checksum(job_id: int, digest: str, counts: Mapping[str, int]) -> int:
    """The xxh3-64 (signed, as a BIGINT holds it) of a job's counts, seeded with its id."""
    text = to_stored_json([digest, [counts[status] for status in COLUMNS]]).encode("utf-8")
    return int.from_bytes(xxhash.xxh3_64_digest(text, seed=job_id), "big", signed=True)


def write_index_row(
    session: Session, job_id: int, digest: str, statuses: Iterable[str], grid_curves: bytes
) -> None:
    """A job's index row (its verdicts' ``statuses``), in the caller's transaction; its old
    one is deleted with its other derived rows."""
    tally = Counter(statuses)
    counts = {str(status): tally.get(status, 0) for status in COLUMNS}
    row = {column.key: counts[status] for status, column in COLUMNS.items()}
    session.execute(
        insert(JobIndex),
        [
            {
                "job_id": job_id,
                "expectations": digest,
                **row,
                "checksum": counts_checksum(job_id, digest, counts),
                "grid_curves": grid_curves,
            }
        ],
    )


_VERIFIED = IntactRows(most=100_000)  # the index rows this process found intact
_STATUSES = tuple(map(str, COLUMNS))
_COUNTS = select(JobIndex.job_id, *COLUMNS.values(), JobIndex.checksum).where(
    among(JobIndex.job_id, "job_ids"),
    JobIndex.expectations == bindparam("digest"),
)


def stored_counts(session: Session, job_ids: list[int], digest: str) -> dict[int, dict[str, int]]:
    """Status -> count of each listed job that has an index row for ``digest``, in one
    statement; ``DamagedVerdicts`` when a job's counts are not those its checksum was made of."""
    found: dict[int, dict[str, int]] = {}
    for row in driver_rows(session, _COUNTS, {"job_ids": job_ids, "digest": digest}):
        job_id, *numbers, checksum = row
        counts = dict(zip(_STATUSES, numbers, strict=True))
        read = hash((digest, *row))
        if read not in _VERIFIED:
            if counts_checksum(job_id, digest, counts) != checksum:
                name = session.scalar(select(Job.name).where(Job.id == job_id))
                raise DamagedVerdicts(job=name, difference="verdict counts' checksum mismatch")
            _VERIFIED.add(read)
        found[job_id] = counts
    return found


def stored_grid_curves(session: Session, job_ids: list[int], digest: str) -> dict[int, bytes]:
    """The kept curves of each listed job that has an index row for ``digest``, in one
    statement (they check themselves when read: ``tracker.summary.stored``)."""
    query = select(JobIndex.job_id, JobIndex.grid_curves).where(
        among(JobIndex.job_id, job_ids), JobIndex.expectations == digest
    )
    return {job_id: bytes(data) for job_id, data in session.execute(query)}


def indexed(digest: str) -> Select[int]:
    """The ids of the jobs that have an index row for ``digest``."""
    return select(JobIndex.job_id).where(JobIndex.expectations == digest)

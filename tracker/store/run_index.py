"""Each job's kept ``RunIndex`` (``tracker.summary.run_index``), one row a job: written with its
other derived rows (``tracker.store.kept_rows``), read for many jobs by the runs table, the
seeds table and the claims, which then read no run, curve or note row. Kept for the code that
made it (``code``: ``tracker.summary.version.CODE_DIGEST``); its checksum is checked on every
read."""

from __future__ import annotations

from collections.abc import Iterator

import xxhash
from sqlalchemy import Select, bindparam, insert, select
from sqlalchemy.orm import Session

from tracker.errors import DamagedRunIndex
from tracker.models import Job, RunIndex
from tracker.store.raw_rows import IntactRows, streamed_rows
from tracker.store.value_lists import among


def run_index_checksum(job_id: int, code: str, runs: bytes) -> int:
    """The xxh3-64 (signed, as a BIGINT holds it) of the code digest and the packed index,
    seeded with the job's id."""
    digest = xxhash.xxh3_64_digest(code.encode("utf-8") + b"\0" + runs, seed=job_id)
    return int.from_bytes(digest, "big", signed=True)


def write_run_index(session: Session, job_id: int, code: str, runs: bytes) -> None:
    """A job's index row, in the caller's transaction; its old one is deleted with its other
    derived rows."""
    checksum = run_index_checksum(job_id, code, runs)
    row = {"job_id": job_id, "code": code, "checksum": checksum, "runs": runs}
    session.execute(insert(RunIndex), [row])


_VERIFIED = IntactRows(most=100_000)  # the rows this process found intact
_KEPT = (
    select(Job.id, RunIndex.checksum, RunIndex.runs)
    .outerjoin(RunIndex, (RunIndex.job_id == Job.id) & (RunIndex.code == bindparam("code")))
    .where(among(Job.id, "job_ids"))
    .order_by(Job.id)
)


def kept_run_indexes(
    session: Session, job_ids: list[int], code: str
) -> Iterator[tuple[int, bytes | None]]:
    """``(job id, packed index)`` of each listed job, the index None where it has none made
    by ``code``, in job id order, streamed (one statement); ``DamagedRunIndex`` for one that is
    not what its checksum was made of."""
    parameters = {"job_ids": job_ids, "code": code}
    for job_id, checksum, data in streamed_rows(session, _KEPT, parameters, driver=True):
        if data is None:
            yield job_id, None
            continue
        runs = bytes(data)
        read = hash((job_id, checksum, code, runs))
        if read not in _VERIFIED:
            if run_index_checksum(job_id, code, runs) != checksum:
                name = session.scalar(select(Job.name).where(Job.id == job_id))
                raise DamagedRunIndex(job=name, reason="checksum mismatch")
            _VERIFIED.add(read)
        yield job_id, runs


def indexed_runs(code: str) -> Select[int]:
    """The ids of the jobs that have an index row made by ``code``."""
    return select(RunIndex.job_id).where(RunIndex.code == code)

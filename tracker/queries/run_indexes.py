"""Each job's ``RunIndex`` (``tracker.summary.run_index``) for the reads across jobs: kept
where today's code made one (``tracker.store.run_index``), else made from the job's runs,
each checked against its checksum (``tracker.store.run_rows``). Four statements at most,
whatever the number of jobs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlalchemy.orm import Session

from tracker.store.raw_rows import JobStream
from tracker.store.run_index import kept_run_indexes
from tracker.store.run_rows import verified_runs_by_job
from tracker.summary.run_index import RunIndex, run_index, unpacked_index
from tracker.summary.version import CODE_DIGEST


def run_indexes(session: Session, job_ids: Iterable[int]) -> Iterator[tuple[int, RunIndex]]:
    """``(job id, its index)`` of the listed jobs in job id order; a job without runs and
    without a kept index has none."""
    # packed: about a kB a job; a listed id of no job has no entry
    kept = dict(kept_run_indexes(session, sorted(set(job_ids)), CODE_DIGEST))
    missing = [job_id for job_id, packed in kept.items() if packed is None]
    made = JobStream(
        (runs[0].job_id, run_index(runs)) for runs in verified_runs_by_job(session, missing)
    )
    for job_id, packed in kept.items():
        index = made.take(job_id) if packed is None else unpacked_index(packed)
        if index is not None:
            yield job_id, index

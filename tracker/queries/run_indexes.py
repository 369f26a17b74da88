"""The runs of many jobs as the runs table, the seeds table and the claims read them
(``tracker.summary.run_index``): each job's kept index where today's code made one
(``tracker.store.run_index``), else made from its runs, each checked against its checksum
(``tracker.store.run_rows``). Four statements at most, whatever the number of jobs."""

from __future__ import annotations

from collections.abc import Collection, Iterable

import polars as pl
from sqlalchemy.orm import Session

from tracker.store.raw_rows import JobStream
from tracker.store.run_index import kept_run_indexes
from tracker.store.run_rows import verified_runs_by_job
from tracker.summary.run_index import index_frame, packed_index
from tracker.summary.version import CODE_DIGEST


def run_indexes(
    session: Session, job_ids: Iterable[int], numbers: Collection[str] = ()
) -> pl.DataFrame:
    """A row a run of the listed jobs (``tracker.summary.run_index.SCHEMA``, then a column a
    name of ``numbers``: their summaries' numbers), in job id order, each job's runs by
    variant, seed, arm."""
    # packed: well under a kB a job; a listed id of no job has no entry
    kept = dict(kept_run_indexes(session, sorted(set(job_ids)), CODE_DIGEST))
    missing = [job_id for job_id, packed in kept.items() if packed is None]
    made = JobStream(
        (runs[0].job_id, packed_index(runs)) for runs in verified_runs_by_job(session, missing)
    )
    found = []
    for job_id, packed in kept.items():
        index = made.take(job_id) if packed is None else packed
        if index is not None:
            found.append((job_id, index))
    return index_frame(found, numbers)

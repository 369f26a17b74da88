"""The runs of many jobs as the runs table, the seeds table and the claims read them
(``tracker.summary.run_index``): each job's kept index where today's code made one
(``tracker.store.run_index``), else made from its runs, each checked against its checksum
(``tracker.store.run_rows``). Four statements at most, whatever the number of jobs."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from itertools import chain

import polars as pl
from sqlalchemy.orm import Session

from tracker.store.raw_rows import batches
from tracker.store.run_index import kept_run_indexes
from tracker.store.run_rows import verified_runs_by_job
from tracker.summary.run_index import index_frame, packed_index
from tracker.summary.version import CODE_DIGEST

# jobs' packed indexes made into a frame at once: their bytes and texts are held only so long
DECODED_JOBS = 1_000


def run_indexes(
    session: Session, job_ids: Iterable[int], numbers: Collection[str] = ()
) -> pl.DataFrame:
    """A row a run of the listed jobs (``tracker.summary.run_index.SCHEMA``, then a column a
    name of ``numbers``: their summaries' numbers), in job id order, each job's runs by
    variant, seed, arm."""
    missing: list[int] = []

    def kept() -> Iterator[tuple[int, bytes]]:
        for job_id, packed in kept_run_indexes(session, sorted(set(job_ids)), CODE_DIGEST):
            if packed is None:
                missing.append(job_id)
            else:
                yield job_id, packed

    def made() -> Iterator[tuple[int, bytes]]:  # begun after the last kept one: ``missing`` whole
        for runs in verified_runs_by_job(session, missing):
            yield runs[0].job_id, packed_index(runs)

    indexes = batches(chain(kept(), made()), DECODED_JOBS)
    frames = [index_frame(batch, numbers) for batch in indexes]
    found = pl.concat(frames) if frames else index_frame([], numbers)
    return found.sort("job_id", maintain_order=True) if missing else found

"""Per-job derived rows: a job's verdicts, the numbers behind them and its stored summary
(bytes, ``tracker.summary.model``), persisted and read as given.

Cross-job claims and the regression gate need every job's verdicts and its EMA deltas, and a
job's pages its analysis, drawn trajectories and smoothed curves, all of which take every
curve point to compute. ``tracker.services.rederive`` computes them once, when a job is
ingested or copied (and for jobs stored before, with ``tracker db rederive``), against the
packaged expectations, and stores them here under the digest of those expectations and of
the analysis code (``tracker.summary.version``), a job's verdicts as one row of packed
columns (``tracker.store.packed_verdicts``). This module only writes and reads those rows; it
runs no analysis. ``tracker.queries.job_analysis`` reads them, analysing a job that has
none for the expectations asked for from its points, so a read-only database serves every
request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from sqlalchemy import Select, bindparam, delete, insert, or_, select
from sqlalchemy.orm import Session

from tracker.analysis.checks import Check
from tracker.analysis.verdict import Verdict
from tracker.models import Job, JobIndex, JobNumber, JobSummary, JobVerdicts, RunIndex
from tracker.store.index_rows import indexed, write_index_row
from tracker.store.packed_verdicts import PACKED, kept_columns, pack, rows_checksum
from tracker.store.raw_rows import JobStream, job_groups, streamed_rows, table_of
from tracker.store.run_index import indexed_runs, write_run_index
from tracker.store.value_lists import among
from tracker.store.verdict_columns import VerdictRow
from tracker.store.verdict_keys import key_digest, key_ids, split_detail


def stored_number(value: object) -> float | None:
    """A verdict's measured or expected value as stored: a flag as 1.0 / 0.0, text as None."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value) if isinstance(value, int | float) else None


# checks whose measured and expected values are flags (kept as 1.0 / 0.0 by ``stored_number``)
FLAG_CHECKS = frozenset({Check.DIVERGED})


def kept_value(check: str, value: float | None) -> float | bool | None:
    """A verdict's measured or expected value as ``stored_number`` kept it, a flag check's as
    the flag again: so the verdict read back is the one analysed (``tracker compare`` judges a
    flag by its status, a number against its yardstick)."""
    return bool(value) if check in FLAG_CHECKS and value is not None else value


def verdict_row(job_id: int, v: Verdict) -> VerdictRow:
    """A verdict as the row ``stored_rows`` reads back."""
    measured, expected = stored_number(v.measured), stored_number(v.expected)
    return (
        job_id, v.check, v.subject, measured, expected, v.tolerance, v.status, v.detail, v.known
    )  # fmt: skip


def write_derived(
    session: Session,
    job_id: int,
    digest: str,
    verdicts: Sequence[Verdict],
    numbers: Mapping[str, float | None],
    summary: bytes,
    grid_curves: bytes,
    runs: tuple[str, bytes],
    *,
    replace: bool = True,
) -> None:
    """Replace a job's derived rows (of every digest) by these, in the caller's transaction;
    ``runs``: its packed run index and the digest of the code that made it;
    ``replace=False``: a job that has none yet (just written), so none is deleted."""
    if replace:
        for table in (JobVerdicts, JobNumber, JobSummary, JobIndex, RunIndex):
            session.execute(delete(table).where(table.job_id == job_id))
    split = [split_detail(v.detail) for v in verdicts]
    keys = [
        (v.check, v.subject, stored_number(v.expected), v.status, v.known, template)
        for v, (template, _) in zip(verdicts, split, strict=True)
    ]
    ids = key_ids(session, keys)
    packed = pack(
        [ids[key] for key in keys],
        [stored_number(v.measured) for v in verdicts],
        [v.tolerance for v in verdicts],
        [figures for _, figures in split],
    )
    row = {"job_id": job_id, "count": len(verdicts), **packed}
    session.execute(insert(table_of(JobVerdicts)), [row])
    session.execute(
        insert(JobNumber),
        [
            {"job_id": job_id, "expectations": digest, "name": name, "value": value}
            for name, value in numbers.items()
        ],
    )
    key_digests = b"".join(key_digest(key) for key in keys)
    stored = [packed[column] for column in PACKED]
    checksum = rows_checksum(job_id, digest, key_digests, stored, numbers)
    session.execute(
        insert(JobSummary),
        [{"job_id": job_id, "expectations": digest, "data": summary, "rows_checksum": checksum}],
    )
    write_index_row(session, job_id, digest, (v.status for v in verdicts), grid_curves)
    write_run_index(session, job_id, *runs)


def stored_rows(
    session: Session, job_ids: list[int], digest: str
) -> tuple[dict[int, dict[str, float | None]], list[VerdictRow]]:
    """The numbers and verdict rows stored for ``digest`` (``kept_job_rows``), all of them:
    rows in job id and position order."""
    numbers: dict[int, dict[str, float | None]] = {}
    rows: list[VerdictRow] = []
    for job_id, own, job_rows in kept_job_rows(session, job_ids, digest):
        numbers[job_id] = own
        rows += job_rows
    return numbers, rows


def kept_job_rows(
    session: Session, job_ids: list[int], digest: str
) -> Iterator[tuple[int, dict[str, float | None], list[VerdictRow]]]:
    """``kept_columns`` job by job in id order: each listed job's numbers and verdict rows
    stored for ``digest``, rows in position order (for a reader of a few jobs)."""
    for columns, numbers in kept_columns(session, job_ids, digest):
        by_job = JobStream(job_groups(columns.rows(), 0))
        for job_id, own in numbers.items():
            yield job_id, own, by_job.take(job_id) or []


def judged_against(digest: str) -> Select[int]:
    """The ids of the jobs whose stored rows (verdicts among them) are for ``digest``."""
    return select(JobNumber.job_id).distinct().where(JobNumber.expectations == digest)


# built once, as every page runs it (tracker.store.catalog says why)
_SUMMARY = select(JobSummary.data).where(
    JobSummary.job_id == bindparam("job_id"), JobSummary.expectations == bindparam("digest")
)


def stored_summary(session: Session, job_id: int, digest: str) -> bytes | None:
    """A job's summary stored for ``digest``, if any."""
    data = session.scalar(_SUMMARY, {"job_id": job_id, "digest": digest})
    return None if data is None else bytes(data)


_JOB_SUMMARIES = (
    select(JobSummary.job_id, JobSummary.expectations, JobSummary.data)
    .where(
        among(JobSummary.job_id, "job_ids"),
        JobSummary.expectations.in_(bindparam("digests", expanding=True)),
    )
    .order_by(JobSummary.job_id)
)


def summaries_by_job(
    session: Session, job_ids: list[int], digests: Iterable[str]
) -> Iterator[tuple[int, dict[str, bytes]]]:
    """``stored_summary`` of each listed job for each of ``digests`` it has one for, by digest,
    a job at a time in job id order: one statement whatever the number of jobs, streamed."""
    parameters = {"job_ids": job_ids, "digests": list(digests)}
    rows = streamed_rows(session, _JOB_SUMMARIES, parameters, blobs=True)
    for job_id, own in job_groups(rows, 0):
        yield job_id, {digest: bytes(data) for _, digest, data in own}


def jobs_without_rows(
    session: Session, digest: str, code: str, study: str | None = None
) -> list[tuple[int, str]]:
    """``(id, name)`` of the jobs (of ``study``, or all) lacking their numbers or their summary
    for ``digest`` (never derived, or derived by an older analysis or other expectations, or
    kept before their rows had a checksum or their index row), or a run index made by
    ``code``, in id order."""
    numbers = select(JobNumber.job_id).where(JobNumber.expectations == digest)
    summaries = select(JobSummary.job_id).where(
        JobSummary.expectations == digest, JobSummary.rows_checksum.is_not(None)
    )
    query = (
        select(Job.id, Job.name)
        .where(
            or_(
                Job.id.not_in(numbers),
                Job.id.not_in(summaries),
                Job.id.not_in(indexed(digest)),
                Job.id.not_in(indexed_runs(code)),
            )
        )
        .order_by(Job.id)
    )
    if study is not None:
        query = query.where(Job.study == study)
    return [(job_id, name) for job_id, name in session.execute(query)]

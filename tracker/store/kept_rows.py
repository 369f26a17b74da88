"""Per-job derived rows: a job's verdicts, the numbers behind them and its stored summary
(bytes, ``tracker.summary.model``), persisted and read as given.

Cross-job claims and the regression gate need every job's verdicts and its EMA deltas, and a
job's pages its analysis, drawn trajectories and smoothed curves, all of which take every
curve point to compute. ``tracker.services.rederive`` computes them once, when a job is
ingested or copied (and for jobs stored before, with ``tracker db rederive``), against the
packaged expectations, and stores them here under the digest of those expectations and of
the analysis code (``tracker.summary.version``). This module only writes and reads those
rows; it runs no analysis. ``tracker.queries.job_analysis`` reads them, analysing a job that has
none for the expectations asked for from its points, so a read-only database serves every
request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import xxhash
from sqlalchemy import Select, and_, bindparam, delete, insert, or_, select
from sqlalchemy.orm import Session

from tracker.analysis.checks import Check
from tracker.analysis.verdict import Verdict
from tracker.errors import DamagedVerdicts
from tracker.jsonio import stored_json_string, to_stored_json
from tracker.models import Job, JobIndex, JobNumber, JobSummary, JobVerdict, VerdictKey
from tracker.store.index_rows import indexed, write_index_row
from tracker.store.raw_rows import JobStream, job_groups, plain_rows, streamed_rows, table_of
from tracker.store.value_lists import among
from tracker.store.verdict_keys import detail, key_ids, split_detail

# job_id, check, subject, measured, expected, tolerance, status, detail, known
VerdictRow = tuple[int, str, str, float | None, float | None, float | None, str, str, str | None]


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


def rows_checksum(
    job_id: int,
    digest: str,
    rows: Iterable[Sequence[object]],
    numbers: Mapping[str, float | None],
) -> int:
    """The xxh3-64 (signed, as a BIGINT holds it) of a job's verdict rows (``VerdictRow``s, in
    position order) and numbers as stored, seeded with its id: rows moved to another job, or
    one of them altered, no longer match. Of the JSON ``to_stored_json`` writes of
    ``[digest, [row[1:] of each row], sorted numbers]``, every number as ``_exact``'s text."""
    texts = ", ".join(_row_text(row) for row in rows)
    named = to_stored_json(sorted((name, _exact(value)) for name, value in numbers.items()))
    text = f"[{stored_json_string(digest)}, [{texts}], {named}]"
    return int.from_bytes(
        xxhash.xxh3_64_digest(text.encode("utf-8"), seed=job_id), "big", signed=True
    )


# A row's JSON around its own values (measured, tolerance, detail), by the key columns it
# shares with the same verdict of other jobs: made once a key, not once a row (a page of
# 10,000 jobs checks a million rows).
_ROW_PARTS: dict[tuple[object, ...], tuple[str, str, str, str]] = {}
ROW_PARTS_KEPT = 20_000


def _row_text(row: Sequence[object]) -> str:
    """``to_stored_json([_exact(value) for value in row[1:]])`` of a ``VerdictRow``."""
    _, check, subject, measured, expected, tolerance, status, detail, known = row
    shared = (check, subject, expected, status, known)
    parts = _ROW_PARTS.get(shared)
    if parts is None:
        if len(_ROW_PARTS) >= ROW_PARTS_KEPT:
            _ROW_PARTS.clear()
        parts = _ROW_PARTS[shared] = (
            f"[{_json_value(check)}, {_json_value(subject)}, ",
            f", {_json_value(expected)}, ",
            f", {_json_value(status)}, ",
            f", {_json_value(known)}]",
        )
    own = (_json_value(measured), _json_value(tolerance), _json_value(detail))
    return f"{parts[0]}{own[0]}{parts[1]}{own[1]}{parts[2]}{own[2]}{parts[3]}"


def _json_value(value: object) -> str:
    """``to_stored_json(_exact(value))``, the common kinds without a call into the encoder."""
    kind = value.__class__
    if kind is str:
        return stored_json_string(value)  # type: ignore[arg-type]
    if kind is float:
        return f'"{value + 0.0!r}"'  # type: ignore[operator]
    return "null" if value is None else to_stored_json(_exact(value))


def _exact(value: object) -> object:
    """A stored value as read back alike on every backend: a number as a float (its repr
    keeps every bit, NaN and the infinities included)."""
    kind = value.__class__
    if kind is str or value is None:  # most of a row: tested first, as every read checks all
        return value
    if kind is float:  # -0.0 as 0.0, as below
        return repr(value + 0.0)  # type: ignore[operator]
    if kind is int or (isinstance(value, int | float) and kind is not bool):
        # -0.0 as 0.0: SQLite may keep a zero as the integer
        return repr(float(value) + 0.0)  # type: ignore[arg-type]
    return value


def write_derived(
    session: Session,
    job_id: int,
    digest: str,
    verdicts: Sequence[Verdict],
    numbers: Mapping[str, float | None],
    summary: bytes,
    grid_curves: bytes,
    *,
    replace: bool = True,
) -> None:
    """Replace a job's derived rows (of every digest) by these, in the caller's transaction;
    ``replace=False``: a job that has none yet (just written), so none is deleted."""
    if replace:
        for table in (JobVerdict, JobNumber, JobSummary, JobIndex):
            session.execute(delete(table).where(table.job_id == job_id))
    split = [split_detail(v.detail) for v in verdicts]
    keys = [
        (v.check, v.subject, stored_number(v.expected), v.status, v.known, template)
        for v, (template, _) in zip(verdicts, split, strict=True)
    ]
    ids = key_ids(session, keys)
    verdict_rows = [
        {
            "job_id": job_id,
            "position": position,
            "key_id": ids[key],
            "measured": stored_number(v.measured),
            "tolerance": v.tolerance,
            "figures": figures,
        }
        for position, (v, key, (_, figures)) in enumerate(zip(verdicts, keys, split, strict=True))
    ]
    if verdict_rows:
        session.execute(insert(table_of(JobVerdict)), verdict_rows)
    session.execute(
        insert(JobNumber),
        [
            {"job_id": job_id, "expectations": digest, "name": name, "value": value}
            for name, value in numbers.items()
        ],
    )
    checksum = rows_checksum(job_id, digest, [verdict_row(job_id, v) for v in verdicts], numbers)
    session.execute(
        insert(JobSummary),
        [{"job_id": job_id, "expectations": digest, "data": summary, "rows_checksum": checksum}],
    )
    write_index_row(session, job_id, digest, (v.status for v in verdicts), grid_curves)


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
    """Job by job in id order, the numbers and verdict rows stored for ``digest`` of the
    listed jobs that have them (and their checksum: rows kept before it are as none), rows in
    position order; ``DamagedVerdicts`` when a job's rows are not those its checksum was made
    of. Three statements whatever the number of jobs, the numbers and rows streamed."""
    if not job_ids:
        return
    # each key read once, not with each of its rows: the rows carry only what is their own
    keys = {
        key_id: key
        for key_id, *key in plain_rows(
            session,
            select(VerdictKey.id, VerdictKey.check, VerdictKey.subject, VerdictKey.expected)
            .add_columns(VerdictKey.status, VerdictKey.detail_template, VerdictKey.known)
            .where(
                VerdictKey.id.in_(
                    select(JobVerdict.key_id).where(among(JobVerdict.job_id, job_ids))
                )
            ),
        )
    }
    numbers = (
        select(JobNumber.job_id, JobNumber.name, JobNumber.value, JobSummary.rows_checksum)
        .outerjoin(
            JobSummary,
            and_(JobSummary.job_id == JobNumber.job_id, JobSummary.expectations == digest),
        )
        .where(among(JobNumber.job_id, job_ids), JobNumber.expectations == digest)
        .order_by(JobNumber.job_id)
    )
    verdicts = (
        select(JobVerdict.job_id, JobVerdict.key_id, JobVerdict.measured, JobVerdict.tolerance)
        .add_columns(JobVerdict.figures)
        .where(among(JobVerdict.job_id, job_ids))
        .order_by(JobVerdict.job_id, JobVerdict.position)
    )
    by_job = JobStream(job_groups(streamed_rows(session, verdicts), 0))
    for job_id, listed in job_groups(streamed_rows(session, numbers), 0):
        own: dict[str, float | None] = {name: value for _, name, value, _ in listed}
        kept = listed[0][3]  # the job's checksum, on each of its numbers
        # a job's verdicts without numbers are not ``digest``'s: passed over
        rows = _verdict_rows(by_job.take(job_id) or [], keys)
        if kept is None:  # kept before rows had a checksum: analysed afresh, as if none
            continue
        if rows_checksum(job_id, digest, rows, own) != kept:
            name = session.scalar(select(Job.name).where(Job.id == job_id))
            raise DamagedVerdicts(job=name, difference="checksum mismatch")
        yield job_id, own, rows


def _verdict_rows(
    stored: Iterable[Sequence[Any]], keys: Mapping[int, Sequence[Any]]
) -> list[VerdictRow]:
    """A job's stored verdict rows with their keys' columns (a missing key: a missing row)."""
    rows: list[VerdictRow] = []
    for job_id, key_id, measured, tolerance, figures in stored:
        if (key := keys.get(key_id)) is None:
            continue
        check, subject, expected, status, template, known = key
        text = detail(template, None if figures is None else bytes(figures))
        rows.append((job_id, check, subject, measured, expected, tolerance, status, text, known))
    return rows


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
    session: Session, digest: str, study: str | None = None
) -> list[tuple[int, str]]:
    """``(id, name)`` of the jobs (of ``study``, or all) lacking their numbers or their summary
    for ``digest`` (never derived, or derived by an older analysis or other expectations, or
    kept before their rows had a checksum or their index row), in id order."""
    numbers = select(JobNumber.job_id).where(JobNumber.expectations == digest)
    summaries = select(JobSummary.job_id).where(
        JobSummary.expectations == digest, JobSummary.rows_checksum.is_not(None)
    )
    query = (
        select(Job.id, Job.name)
        .where(
            or_(Job.id.not_in(numbers), Job.id.not_in(summaries), Job.id.not_in(indexed(digest)))
        )
        .order_by(Job.id)
    )
    if study is not None:
        query = query.where(Job.study == study)
    return [(job_id, name) for job_id, name in session.execute(query)]

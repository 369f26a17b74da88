"""``tracker db check``'s look at derived rows: each checked against what it derives from.

A curve's numbers (first and last value, finite minimum and maximum, non-finite count) against
its points; a run's row, notes and curve rows against their checksum
(``tracker.store.run_rows``: not derived from other rows, a damaged run needs its job's files);
a job's stored verdicts and numbers against its kept summary (checksummed, the
verdicts' source: ``tracker.summary.build.derive``); its run index against its runs. Each
difference is one line; ``repair`` rewrites them from their source (``tracker.services.check``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import polars as pl
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from tracker.analysis.expectations import judged_by
from tracker.errors import (
    DamagedCurveNumbers,
    DamagedRun,
    DamagedRunIndex,
    DamagedSummary,
    DamagedVerdicts,
)
from tracker.models import Curve, Job, JobSummary, Run
from tracker.store.index_rows import stored_counts
from tracker.store.job_rows import curve_summary
from tracker.store.kept_rows import stored_rows, verdict_row
from tracker.store.run_index import kept_run_indexes
from tracker.store.run_rows import StoredRun, as_read, stored_runs
from tracker.store.study_definitions import stored_study
from tracker.summary.build import derive
from tracker.summary.run_index import packed_index
from tracker.summary.stored import read_summary
from tracker.summary.trajectories import TrajectoryDrawing
from tracker.summary.version import CODE_DIGEST, expectations_digest

VALUE_COLUMNS = ("first_value", "last_value", "min_value", "max_value", "n_nonfinite")


def _same(a: object, b: object) -> bool:
    """Equal as stored: NaN to NaN, -0.0 not to 0.0, an integer to its float."""
    return repr(_stored(a)) == repr(_stored(b))


def _stored(value: object) -> object:
    if isinstance(value, tuple):
        return tuple(_stored(each) for each in value)
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def curve_numbers(
    session: Session, curve_id: int, steps: object, values: object
) -> tuple[dict[str, object], DamagedCurveNumbers | None]:
    """The value columns the curve's points give, and the first that its row disagrees with."""
    row = session.execute(
        select(Job.name, Run.arm, Curve.metric, *(getattr(Curve, c) for c in VALUE_COLUMNS))
        .join(Run, Run.id == Curve.run_id)
        .join(Job, Job.id == Run.job_id)
        .where(Curve.id == curve_id)
    ).one()
    job, arm, metric, *stored = row
    points = pl.DataFrame(
        {"step": steps, "value": values}, schema={"step": pl.Int64, "value": pl.Float64}
    )
    derived = {column: curve_summary(metric, points)[column] for column in VALUE_COLUMNS}
    for column, kept in zip(VALUE_COLUMNS, stored, strict=True):
        value = derived[column]
        if not _same(kept, value):
            found = DamagedCurveNumbers(
                job=job, arm=arm, metric=metric, column=column, stored=kept, derived=value
            )
            return derived, found
    return derived, None


def rewrite_curve_numbers(session: Session, curve_id: int, numbers: dict[str, object]) -> None:
    """A curve's value columns as its points give them, in the caller's transaction."""
    session.execute(update(Curve).where(Curve.id == curve_id).values(**numbers))


def runs_of(
    session: Session, job_ids: list[int], numbers: Mapping[int, Mapping[str, object]]
) -> tuple[list[DamagedRun], list[StoredRun]]:
    """The runs of the listed jobs that are not what their checksum was made of, neither as
    stored nor with the curve numbers their points give (``numbers``, by curve id: those are
    said by their own lines, and mended by rewriting them); and the intact runs whose checksum
    was made of numbers their points do not give (to be made afresh as those are rewritten)."""
    sqlite = session.get_bind().dialect.name == "sqlite"
    damaged, stale = [], []
    for run in stored_runs(session, job_ids):
        own = {
            curve_id: {
                column: as_read(column, v, sqlite) for column, v in numbers[curve_id].items()
            }
            for curve_id in run.curves
            if curve_id in numbers
        }
        if not run.damaged():
            if own:
                stale.append(run)
        elif not own or run.damaged(own):
            damaged.append(run.error())
    return damaged, stale


def verdicts_of(session: Session, job_id: int, job: str, study: str) -> DamagedVerdicts | None:
    """Whether the job's stored verdicts and numbers (for its study's packaged expectations)
    are those its kept summary gives; None when none are stored or the summary is damaged
    (said by the summary's own check)."""
    exp = judged_by(study, stored_study(session, study))
    digest = expectations_digest(exp)
    data = session.scalar(
        select(JobSummary.data).where(
            JobSummary.job_id == job_id, JobSummary.expectations == digest
        )
    )
    try:
        numbers, rows = stored_rows(session, [job_id], digest)  # their checksum checked first
        counts = stored_counts(session, [job_id], digest).get(job_id)
    except DamagedVerdicts as exc:
        return exc
    tally = Counter(row[6] for row in rows)
    if counts is not None and any(counts[status] != tally[status] for status in counts):
        return DamagedVerdicts(job=job, difference="verdict counts differ from its verdicts")
    if data is None or not numbers:
        return None
    try:
        derived = derive(read_summary(job, bytes(data), not_drawn), exp)
    except DamagedSummary:  # the summary's own check says so, once
        return None
    expected = [verdict_row(job_id, v) for v in derived.verdicts]
    if len(rows) != len(expected):
        return DamagedVerdicts(
            job=job, difference=f"{len(rows)} verdicts, its summary gives {len(expected)}"
        )
    for position, (kept, made) in enumerate(zip(rows, expected, strict=True)):
        if not _same(tuple(kept), made):
            subject = f"{made[1]} {made[2]}"
            difference = f"verdict {position + 1}, {subject}, differs from its summary"
            return DamagedVerdicts(job=job, difference=difference)
    for name, value in derived.numbers.items():
        if not _same(numbers[job_id].get(name), None if value is None else float(value)):
            difference = f"number {name} differs from its summary"
            return DamagedVerdicts(job=job, difference=difference)
    return None


def not_drawn() -> TrajectoryDrawing:
    raise AssertionError("a check reads a summary and never draws its lines")


def run_index_of(session: Session, job_id: int, job: str) -> DamagedRunIndex | None:
    """Whether the job's kept run index (of today's code) is what its runs (intact: the caller
    checked them) give; None when it has none."""
    try:
        kept = dict(kept_run_indexes(session, [job_id], CODE_DIGEST)).get(job_id)
    except DamagedRunIndex as exc:
        return exc
    if kept is None:
        return None
    if kept != packed_index(stored_runs(session, [job_id])):
        return DamagedRunIndex(job=job, reason="it differs from its runs")
    return None

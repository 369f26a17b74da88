"""A job's derived rows as the pages, claims and the gate read them: the stored ones
(``tracker.store.kept_rows``), else made from the job's points on the spot (nothing is written,
so a read-only database serves every request)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterator

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.analysis.expectations import Expectations, judged_by, study_names
from tracker.analysis.study_files import StoredStudy
from tracker.analysis.verdict import Verdict
from tracker.domain import Status
from tracker.errors import UnknownStudy, known_names
from tracker.models import Job
from tracker.store.curves import arm_points
from tracker.store.index_rows import stored_counts, stored_grid_curves
from tracker.store.jobdata import load_job_data
from tracker.store.kept_rows import (
    kept_value,
    stored_rows,
    stored_summary,
    verdict_row,
)
from tracker.store.packed_verdicts import JobNumbers, kept_columns
from tracker.store.raw_rows import plain_rows
from tracker.store.study_definitions import defined_studies, stored_study
from tracker.store.value_lists import among
from tracker.store.verdict_columns import VerdictColumns
from tracker.summary.build import derive, summarize
from tracker.summary.grid import GridCurve
from tracker.summary.model import Derived, Summary
from tracker.summary.stored import read_grid_curves, read_summary
from tracker.summary.trajectories import TrajectoryDrawing, drawing_of_points
from tracker.summary.version import expectations_digest


def _derived_from_points(
    session: Session, job_ids: list[int], exp: Expectations
) -> Iterator[tuple[int, Derived]]:
    """Each listed job's derived rows made from its points, one job at a time."""
    if not job_ids:
        return
    names = dict(session.execute(select(Job.id, Job.name).where(among(Job.id, job_ids))).all())
    for job_id in job_ids:
        yield job_id, derive(summarize(load_job_data(session, names[job_id]), exp), exp)


def job_studies(session: Session, job_ids: list[int]) -> dict[int, str]:
    """Each listed job's study."""
    return dict(plain_rows(session, select(Job.id, Job.study).where(among(Job.id, job_ids))))


def _stored_study(session: Session, study: str) -> StoredStudy | None:
    """``stored_study``, read once a session (a page of many jobs asks for each job's)."""
    kept: dict[str, StoredStudy | None] = session.info.setdefault("stored_studies", {})
    if study not in kept:
        kept[study] = stored_study(session, study)
    return kept[study]


def study_of(session: Session, study: str) -> Expectations:
    """What judges the jobs of ``study`` in this database (``judged_by``)."""
    return judged_by(study, _stored_study(session, study))


def database_study(session: Session, study: str) -> Expectations:
    """``study``'s expectations: its file's, else the definition this database keeps of it
    (a teammate's study); else ``UnknownStudy``, naming the studies of both."""
    stored = _stored_study(session, study)
    known = study_names()
    if stored is None and study not in known:
        known += defined_studies(session)
        raise UnknownStudy(study=study, known=known_names(known, near=study))
    return judged_by(study, stored)


def study_judging(session: Session, exp: Expectations, study: str) -> Expectations:
    """``exp.judging`` the study ``study``, with the definition this database keeps of it
    (what judges its jobs where its file is not here)."""
    return exp.judging(study, _stored_study(session, study))


def by_study(
    session: Session, job_ids: list[int], exp: Expectations
) -> list[tuple[Expectations, list[int]]]:
    """The listed jobs in groups judged alike (``exp.judging`` each one's study), in order."""
    studies = job_studies(session, job_ids)
    groups: dict[str, list[int]] = {}
    for job_id in job_ids:
        groups.setdefault(studies.get(job_id, exp.study_name), []).append(job_id)
    return [(study_judging(session, exp, study), ids) for study, ids in groups.items()]


def load_derived(session: Session, job_ids: list[int], exp: Expectations) -> dict[int, Derived]:
    """Every listed job's derived rows, each judged by ``exp.judging`` its study: stored
    ones, else computed from points."""
    found: dict[int, Derived] = {}
    for own, ids in by_study(session, job_ids, exp):
        found.update(_load_derived(session, ids, own))
    return found


def _load_derived(session: Session, job_ids: list[int], exp: Expectations) -> dict[int, Derived]:
    numbers, rows = stored_rows(session, job_ids, expectations_digest(exp))
    verdicts: dict[int, list[Verdict]] = {job_id: [] for job_id in numbers}
    for job_id, check, subject, measured, expected, tolerance, status, detail, known in rows:
        measured, expected = kept_value(check, measured), kept_value(check, expected)
        verdicts[job_id].append(
            Verdict(check, subject, measured, expected, tolerance, status, detail, known)
        )
    found = {job_id: Derived(verdicts[job_id], own) for job_id, own in numbers.items()}
    found.update(_derived_from_points(session, [i for i in job_ids if i not in found], exp))
    return found


VerdictBatch = tuple[VerdictColumns, JobNumbers]


def verdict_batches(
    session: Session, job_ids: list[int], exp: Expectations
) -> Iterator[VerdictBatch]:
    """``load_derived`` as columns (``VerdictColumns``: a Verdict object a row costs a second
    for 1,000 jobs), in batches of whole jobs, with each batch's jobs' numbers; each job judged
    by ``exp.judging`` its study. The stored rows of each study's jobs come first, in job id
    order (``kept_columns``), then the jobs without them, derived from their points."""
    for own, ids in by_study(session, job_ids, exp):
        read: set[int] = set()
        for columns, numbers in kept_columns(session, ids, expectations_digest(own)):
            read.update(numbers)
            yield columns, numbers
        missing = [job_id for job_id in ids if job_id not in read]
        for job_id, derived in _derived_from_points(session, missing, own):
            rows = [verdict_row(job_id, v) for v in derived.verdicts]
            yield VerdictColumns.of_rows(rows), {job_id: derived.numbers}


def load_summary(
    session: Session, job_id: int, exp: Expectations, *, trajectories: bool = False
) -> Summary:
    """A job's summary for ``exp.judging`` its study: the stored one, else made from its
    points. ``trajectories``: a short job's drawn lines (none kept) are drawn now, from its
    loss curves in ``session``; without it they are not to be asked for (the index and the
    analyses never draw them, and drawing later could begin a transaction nobody ends)."""
    job = session.get_one(Job, job_id)  # no query when the caller has read it
    exp = study_judging(session, exp, job.study)
    data = stored_summary(session, job_id, expectations_digest(exp))
    draw = (lambda: _drawn(session, job_id, exp)) if trajectories else _not_drawn
    summary = summary_of(session, job.name, exp, data, draw)
    if trajectories:
        _ = summary.trajectories  # drawn now, while ``session`` is open
    return summary


def summary_of(
    session: Session,
    name: str,
    exp: Expectations,
    data: bytes | None,
    draw: Callable[[], TrajectoryDrawing],
) -> Summary:
    """Job ``name``'s summary for ``exp`` (its study's): of ``data``, its bytes stored for
    ``exp`` (``draw`` makes its lines if none were kept), else made from its points."""
    if data is None:
        return summarize(load_job_data(session, name), exp)
    return read_summary(name, data, draw)


def load_index_numbers(
    session: Session, job_ids: list[int], exp: Expectations, drawn: Collection[int]
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, GridCurve]]]:
    """Every listed job's verdict counts (status -> count), and the smoothed curves on a grid
    of those ``drawn`` across jobs, each for ``exp.judging`` its study: from their index rows
    in a few statements whatever the number of jobs; a job without one (kept before them,
    until ``db rederive``) from its verdicts and its summary."""
    counts: dict[int, dict[str, int]] = {}
    curves: dict[int, dict[str, GridCurve]] = {}
    names = dict(session.execute(select(Job.id, Job.name).where(among(Job.id, list(drawn)))).all())
    for own, ids in by_study(session, job_ids, exp):
        digest = expectations_digest(own)
        counts.update(stored_counts(session, ids, digest))
        shown = [job_id for job_id in ids if job_id in names]
        for job_id, data in stored_grid_curves(session, shown, digest).items():
            curves[job_id] = read_grid_curves(names[job_id], data)
    missing = [
        job_id
        for job_id in job_ids
        if job_id not in counts or (job_id in names and job_id not in curves)
    ]
    for job_id, derived in load_derived(session, missing, exp).items():
        tally = Counter(v.status for v in derived.verdicts)
        counts[job_id] = {str(status): tally.get(status, 0) for status in Status}
        if job_id in names:
            curves[job_id] = load_summary(session, job_id, exp).curves
    return counts, curves


def _not_drawn() -> TrajectoryDrawing:
    raise AssertionError("a short job's lines are drawn by load_summary(..., trajectories=True)")


def _drawn(session: Session, job_id: int, exp: Expectations) -> TrajectoryDrawing:
    """A job's trajectories figure's lines from its loss curves (read alone: no probes)."""
    return drawing_of_points(arm_points(session, job_id), exp)

"""Per-job derived rows: a job's verdicts, the numbers behind them and its summary, kept
at ingest.

Cross-job claims and the regression gate need every job's verdicts and its EMA deltas, and a
job's pages its analysis, drawn trajectories and smoothed curves, all of which take every
curve point to compute. They are computed once, when the job is ingested (and for jobs
ingested before, by migrations 0003 and 0004), against the packaged expectations, and stored
under the digest of those expectations and of this analysis' version. Reading them never
writes: a job without rows for the expectations asked for (a user's ``--expectations``
file) is analysed from its points on the spot, so a read-only database serves every request.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from tracker.analysis.verdict import Verdict
from tracker.models import Job, JobNumber, JobSummary, JobVerdict
from tracker.store.frames import plain_rows

if TYPE_CHECKING:
    import polars as pl

    from tracker.analysis.expectations import Expectations
    from tracker.analysis.job import JobAnalysis
    from tracker.figures.crossjob import GridCurve
    from tracker.figures.trajectories import TrajectoryDrawing
    from tracker.store.jobdata import JobData

# Bump when a change of the analysis changes a verdict, a number or a summary for the same
# data and expectations: stored rows of an older version are then ignored (analysed afresh
# on every read), so ship the bump with a migration that refills them (as 0003 does).
ANALYSIS_VERSION = 1
EMA_DELTA = "ema_delta"  # mean |EMA(candidate) - EMA(baseline)| over the 2nd half
SEED_NOISE = "seed_noise"  # mean |EMA(seed twin) - EMA(baseline)| over the 2nd half
DIVERGED_AT = "diverged_at"  # first step whose loss is not finite, of the divergent arm
NUMBERS = (EMA_DELTA, SEED_NOISE, DIVERGED_AT)
# job_id, check, subject, measured, expected, tolerance, status, detail
VerdictRow = tuple[int, str, str, float | None, float | None, float | None, str, str]


@dataclass(frozen=True)
class Derived:
    verdicts: list[Verdict]
    numbers: dict[str, float | None]  # NUMBERS, None when not computable


def expectations_digest(exp: Expectations) -> str:
    """What stored rows were judged against: the expectations' values (not their file
    name) and the analysis version."""
    text = f"{ANALYSIS_VERSION}\n{dataclasses.replace(exp, source='')!r}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Summary:
    """What a job's pages show that takes every point to make."""

    analysis: JobAnalysis
    trajectories: TrajectoryDrawing  # the trajectories figure's lines, downsampled
    curves: dict[str, GridCurve]  # arm -> smoothed loss on a grid, for the figures across jobs
    steps: int  # loss values, all arms together

    def to_json(self) -> str:
        """JSON with NaN and +-inf as bare tokens: read back by ``from_json`` only."""
        analysis = self.analysis
        return json.dumps(
            {
                "analysis": {
                    "mem": analysis.mem,
                    "gpt": analysis.gpt,
                    "verdicts": [v.as_dict() for v in analysis.verdicts],
                    "notes": analysis.notes,
                },
                "trajectories": self.trajectories.to_json(),
                "curves": {arm: curve.to_json() for arm, curve in self.curves.items()},
                "steps": self.steps,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Summary:
        from tracker.analysis.job import JobAnalysis
        from tracker.figures.crossjob import GridCurve
        from tracker.figures.trajectories import TrajectoryDrawing

        doc = json.loads(text)
        analysis = doc["analysis"]
        verdicts = [Verdict(**v) for v in analysis["verdicts"]]
        return cls(
            JobAnalysis(analysis["mem"], analysis["gpt"], verdicts, analysis["notes"]),
            TrajectoryDrawing.from_json(doc["trajectories"]),
            {arm: GridCurve.from_json(curve) for arm, curve in doc["curves"].items()},
            doc["steps"],
        )


def summarize(data: JobData, exp: Expectations) -> Summary:
    """A job's summary from its full data (each arm's loss smoothed once)."""
    from tracker.analysis.job import analyze_job
    from tracker.analysis.smoothing import ema
    from tracker.figures.crossjob import grid_curve
    from tracker.figures.trajectories import trajectory_drawing

    smoothed = {
        arm: ema(frame.get_column("value"), exp.training.ema_alpha)
        for arm, frame in data.curves.items()
    }
    curves = {
        arm: grid_curve(
            frame.get_column("step").to_numpy(),
            smoothed[arm].to_numpy(),
            frame.get_column("value").to_numpy(),
        )
        for arm, frame in data.curves.items()
    }
    return Summary(
        analyze_job(data, exp, smoothed),
        trajectory_drawing(data.curves, exp, smoothed=smoothed),
        curves,
        sum(frame.height for frame in data.curves.values()),
    )


def derive(summary: Summary, exp: Expectations) -> Derived:
    """A job's verdicts and derived numbers, from its summary."""
    from tracker.analysis.training import DELTA_KEY, NOISE_KEY

    gpt = summary.analysis.gpt
    divergent = summary.curves.get(exp.training.divergent)
    first_bad = divergent.first_bad if divergent is not None else None
    numbers = {
        EMA_DELTA: gpt.get(DELTA_KEY),
        SEED_NOISE: gpt.get(NOISE_KEY),
        DIVERGED_AT: None if first_bad is None else float(first_bad),
    }
    return Derived(summary.analysis.verdicts, numbers)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value) if isinstance(value, int | float) else None


def store_derived(
    session: Session,
    job_id: int,
    exp: Expectations,
    losses: dict[str, pl.DataFrame] | None = None,
    *,
    with_summary: bool = True,
) -> None:
    """(Re)compute and store a job's derived rows, in the caller's transaction; ``losses``
    (each arm's loss curve, as stored) spares reading the points back. ``with_summary``
    False: the verdicts and numbers only (migration 0003 runs before the summary table)."""
    from tracker.store.jobdata import load_job_data

    name = session.scalar(select(Job.name).where(Job.id == job_id))
    assert name is not None
    summary = summarize(load_job_data(session, name, curves=losses), exp)
    derived = derive(summary, exp)
    digest = expectations_digest(exp)
    tables = (JobVerdict, JobNumber, JobSummary) if with_summary else (JobVerdict, JobNumber)
    for table in tables:
        session.execute(delete(table).where(table.job_id == job_id))
    verdict_rows = [
        {
            "job_id": job_id,
            "expectations": digest,
            "position": position,
            "check": v.check,
            "subject": v.subject,
            "measured": _number(v.measured),
            "expected": _number(v.expected),
            "tolerance": v.tolerance,
            "status": v.status,
            "detail": v.detail,
        }
        for position, v in enumerate(derived.verdicts)
    ]
    if verdict_rows:
        session.execute(insert(JobVerdict), verdict_rows)
    session.execute(
        insert(JobNumber),
        [
            {"job_id": job_id, "expectations": digest, "name": name, "value": value}
            for name, value in derived.numbers.items()
        ],
    )
    if with_summary:
        session.execute(
            insert(JobSummary),
            [{"job_id": job_id, "expectations": digest, "document": summary.to_json()}],
        )


def store_packaged_derived(
    session: Session,
    job_id: int,
    losses: dict[str, pl.DataFrame] | None = None,
    *,
    with_summary: bool = True,
) -> None:
    """A new job's derived rows against the packaged expectations (at ingest and copy)."""
    from tracker.analysis.expectations import load_expectations

    store_derived(session, job_id, load_expectations(), losses, with_summary=with_summary)


def _stored_rows(
    session: Session, job_ids: list[int], digest: str
) -> tuple[dict[int, dict[str, float | None]], list[VerdictRow]]:
    """The numbers and verdict rows stored for ``digest``, of the listed jobs that have them:
    rows in job id and position order."""
    numbers: dict[int, dict[str, float | None]] = {}
    for job_id, name, value in plain_rows(
        session,
        select(JobNumber.job_id, JobNumber.name, JobNumber.value).where(
            JobNumber.job_id.in_(job_ids), JobNumber.expectations == digest
        ),
    ):
        numbers.setdefault(job_id, {})[name] = value
    columns = (JobVerdict.check, JobVerdict.subject, JobVerdict.measured, JobVerdict.expected)
    query = (
        select(JobVerdict.job_id, *columns, JobVerdict.tolerance, JobVerdict.status)
        .add_columns(JobVerdict.detail)
        .where(JobVerdict.job_id.in_(list(numbers)), JobVerdict.expectations == digest)
        .order_by(JobVerdict.job_id, JobVerdict.position)
    )
    return numbers, list(plain_rows(session, query))


def _derive_from_points(
    session: Session, job_ids: list[int], exp: Expectations
) -> dict[int, Derived]:
    from tracker.store.jobdata import load_job_data

    if not job_ids:
        return {}
    names = dict(session.execute(select(Job.id, Job.name).where(Job.id.in_(job_ids))).all())
    return {
        job_id: derive(summarize(load_job_data(session, names[job_id]), exp), exp)
        for job_id in job_ids
    }


def load_derived(session: Session, job_ids: list[int], exp: Expectations) -> dict[int, Derived]:
    """Every listed job's derived rows for ``exp``: stored ones, else computed from points."""
    numbers, rows = _stored_rows(session, job_ids, expectations_digest(exp))
    verdicts: dict[int, list[Verdict]] = {job_id: [] for job_id in numbers}
    for job_id, check, subject, measured, expected, tolerance, status, detail in rows:
        verdicts[job_id].append(
            Verdict(check, subject, measured, expected, tolerance, status, detail)
        )
    found = {job_id: Derived(verdicts[job_id], own) for job_id, own in numbers.items()}
    found.update(_derive_from_points(session, [i for i in job_ids if i not in found], exp))
    return found


def load_verdict_rows(
    session: Session, job_ids: list[int], exp: Expectations
) -> tuple[list[VerdictRow], dict[int, dict[str, float | None]]]:
    """``load_derived`` as rows, for a frame of many jobs' verdicts (a Verdict object per
    row costs a second for 1,000 jobs): ``(job_id, check, subject, measured, expected,
    tolerance, status, detail)`` with the measured and expected values as stored (a flag as
    1.0 / 0.0, text as None), grouped by job; and each job's numbers."""
    numbers, rows = _stored_rows(session, job_ids, expectations_digest(exp))
    missing = [job_id for job_id in job_ids if job_id not in numbers]
    for job_id, derived in _derive_from_points(session, missing, exp).items():
        rows += [
            (
                job_id,
                v.check,
                v.subject,
                _number(v.measured),
                _number(v.expected),
                v.tolerance,
                v.status,
                v.detail,
            )
            for v in derived.verdicts
        ]
        numbers[job_id] = derived.numbers
    return rows, numbers


def load_summary(session: Session, job_id: int, exp: Expectations) -> Summary:
    """A job's summary for ``exp``: the stored one, else made from its points."""
    from tracker.store.jobdata import load_job_data

    document = session.scalar(
        select(JobSummary.document).where(
            JobSummary.job_id == job_id, JobSummary.expectations == expectations_digest(exp)
        )
    )
    if document is not None:
        return Summary.from_json(document)
    name = session.scalar(select(Job.name).where(Job.id == job_id))
    assert name is not None
    return summarize(load_job_data(session, name), exp)

"""Per-job derived rows: a job's verdicts and the numbers behind them, kept at ingest.

Cross-job claims and the regression gate need every job's verdicts and its EMA deltas, which
take every curve point to compute. They are computed once, when the job is ingested (and for
jobs ingested before, by migration 0003), against the packaged expectations, and stored under
the digest of those expectations and of this analysis' version. Reading them never writes:
a job without rows for the expectations asked for (a user's ``--expectations`` file) is
analysed from its points on the spot, so a read-only database serves every request.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from tracker.analysis.verdict import Verdict
from tracker.models import Job, JobNumber, JobVerdict

if TYPE_CHECKING:
    import polars as pl

    from tracker.analysis.expectations import Expectations
    from tracker.store.jobdata import JobData

# Bump when a change of the analysis changes a verdict or a number for the same data and
# expectations: stored rows of an older version are then ignored (analysed afresh on every
# read), so ship the bump with a migration that refills them (as 0003 does).
ANALYSIS_VERSION = 1
EMA_DELTA = "ema_delta"  # mean |EMA(candidate) - EMA(baseline)| over the 2nd half
SEED_NOISE = "seed_noise"  # mean |EMA(seed twin) - EMA(baseline)| over the 2nd half
DIVERGED_AT = "diverged_at"  # first step whose loss is not finite, of the divergent arm
NUMBERS = (EMA_DELTA, SEED_NOISE, DIVERGED_AT)


@dataclass(frozen=True)
class Derived:
    verdicts: list[Verdict]
    numbers: dict[str, float | None]  # NUMBERS, None when not computable


def expectations_digest(exp: Expectations) -> str:
    """What stored rows were judged against: the expectations' values (not their file
    name) and the analysis version."""
    text = f"{ANALYSIS_VERSION}\n{dataclasses.replace(exp, source='')!r}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def derive(data: JobData, exp: Expectations) -> Derived:
    """A job's verdicts and derived numbers from its full data."""
    import polars as pl

    from tracker.analysis.job import analyze_job
    from tracker.analysis.training import DELTA_KEY, NOISE_KEY

    analysis = analyze_job(data, exp)
    curve = data.curves.get(exp.training.divergent)
    diverged_at = None
    if curve is not None:
        bad = curve.filter(~pl.col("value").is_finite())
        diverged_at = float(bad["step"][0]) if bad.height else None
    numbers = {
        EMA_DELTA: analysis.gpt.get(DELTA_KEY),
        SEED_NOISE: analysis.gpt.get(NOISE_KEY),
        DIVERGED_AT: diverged_at,
    }
    return Derived(analysis.verdicts, numbers)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value) if isinstance(value, int | float) else None


def store_derived(
    session: Session,
    job_id: int,
    exp: Expectations,
    losses: dict[str, pl.DataFrame] | None = None,
) -> None:
    """(Re)compute and store a job's derived rows, in the caller's transaction; ``losses``
    (each arm's loss curve, as stored) spares reading the points back."""
    from tracker.store.jobdata import load_job_data

    name = session.scalar(select(Job.name).where(Job.id == job_id))
    assert name is not None
    derived = derive(load_job_data(session, name, curves=losses), exp)
    digest = expectations_digest(exp)
    for table in (JobVerdict, JobNumber):
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


def store_packaged_derived(
    session: Session, job_id: int, losses: dict[str, pl.DataFrame] | None = None
) -> None:
    """A new job's derived rows against the packaged expectations (at ingest and copy)."""
    from tracker.analysis.expectations import load_expectations

    store_derived(session, job_id, load_expectations(), losses)


def load_derived(session: Session, job_ids: list[int], exp: Expectations) -> dict[int, Derived]:
    """Every listed job's derived rows for ``exp``: stored ones, else computed from points."""
    from tracker.store.jobdata import load_job_data

    digest = expectations_digest(exp)
    found: dict[int, Derived] = {}
    numbers: dict[int, dict[str, float | None]] = {}
    for row in session.execute(
        select(JobNumber.job_id, JobNumber.name, JobNumber.value).where(
            JobNumber.job_id.in_(job_ids), JobNumber.expectations == digest
        )
    ):
        numbers.setdefault(row.job_id, {})[row.name] = row.value
    verdicts: dict[int, list[Verdict]] = {job_id: [] for job_id in numbers}
    columns = (JobVerdict.check, JobVerdict.subject, JobVerdict.measured, JobVerdict.expected)
    query = (
        select(JobVerdict.job_id, *columns, JobVerdict.tolerance, JobVerdict.status)
        .add_columns(JobVerdict.detail)
        .where(JobVerdict.job_id.in_(list(numbers)), JobVerdict.expectations == digest)
        .order_by(JobVerdict.job_id, JobVerdict.position)
    )
    for job_id, *fields in session.execute(query):
        verdicts[job_id].append(Verdict(*fields))
    for job_id, own in numbers.items():
        found[job_id] = Derived(verdicts[job_id], own)
    missing = [job_id for job_id in job_ids if job_id not in found]
    if missing:
        names = dict(session.execute(select(Job.id, Job.name).where(Job.id.in_(missing))).all())
        for job_id in missing:
            found[job_id] = derive(load_job_data(session, names[job_id]), exp)
    return found

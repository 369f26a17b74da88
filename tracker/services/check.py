"""``tracker db check``: every stored chunk and kept summary verified, as SQLite's
``integrity_check`` does for pages: what a read would refuse is found before a read needs it.

Each curve's chunks are checked as every read checks them (``tracker.store.curves``:
checksum, point count, step range), each summary parsed as the pages parse it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tracker.errors import DamagedCurve, DamagedSummary
from tracker.models import Curve, Job, JobSummary, Run
from tracker.store.curves import stored_chunks
from tracker.summary.stored import read_summary
from tracker.summary.trajectories import TrajectoryDrawing


@dataclass
class Checked:
    chunks: int = 0
    summaries: int = 0
    damage: list[tuple[str, str]] = field(default_factory=list)  # (job, one line on it)

    @property
    def damaged_jobs(self) -> list[str]:
        return sorted({job for job, _ in self.damage})

    def outcome_line(self) -> str:
        checked = f"checked {self.chunks} curve chunks and {self.summaries} summaries"
        if not self.damage:
            return f"{checked}: no damage found"
        jobs = self.damaged_jobs
        return f"{checked}: {len(jobs)} jobs damaged: {', '.join(jobs)}"


def check_database(engine: Engine) -> Checked:
    """Verify every chunk and every kept summary of the database at ``engine``."""
    checked = Checked()
    with Session(engine) as session:
        curves = session.execute(
            select(Curve.id, Job.name)
            .join(Run, Run.id == Curve.run_id)
            .join(Job, Job.id == Run.job_id)
            .order_by(Job.name, Curve.id)
        ).all()
        for curve_id, job in curves:
            try:
                checked.chunks += len(stored_chunks(session, curve_id))
            except DamagedCurve as exc:
                checked.damage.append((job, str(exc)))
        summaries = session.execute(
            select(Job.name, JobSummary.data).join(Job, Job.id == JobSummary.job_id)
        )
        for job, data in summaries:
            checked.summaries += 1
            try:
                read_summary(job, data, _not_drawn)
            except DamagedSummary as exc:
                checked.damage.append((job, str(exc)))
    return checked


def _not_drawn() -> TrajectoryDrawing:
    raise AssertionError("a check reads a summary and never draws its lines")

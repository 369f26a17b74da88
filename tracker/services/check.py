"""``tracker db check``: every stored chunk and kept summary verified, as SQLite's
``integrity_check`` does for pages: what a read would refuse is found before a read needs it.

Each curve's chunks are checked as every read checks them (``tracker.store.curves``:
checksum, point count, step range, the curve row against its chunks), each run against its
checksum (``tracker.store.run_rows``: a damaged one needs a re-ingest), each summary parsed
as the pages parse it (its checksum first). On SQLite the engine's own checker runs too
(``PRAGMA integrity_check``: damaged pages, indexes that disagree with their tables).
A job's derived rows (summary, verdicts, numbers) are rebuilt from its points with
``repair``, when its points are intact: being derived, they never need the job's files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tracker.errors import DamagedCurve, DamagedRun, DamagedSummary, TrackerError
from tracker.models import Curve, CurveChunk, Job, JobIndex, JobSummary, Run
from tracker.services.check_derived import (
    curve_numbers,
    not_drawn,
    rewrite_curve_numbers,
    run_index_of,
    runs_of,
    verdicts_of,
)
from tracker.services.rederive import rederive
from tracker.store import transactions
from tracker.store.curves import read_curve
from tracker.store.run_rows import StoredRun, seal_runs
from tracker.summary.stored import read_grid_curves, read_summary


@dataclass
class Checked:
    chunks: int = 0
    summaries: int = 0
    damage: list[tuple[str, str]] = field(default_factory=list)  # (job, one line on it)
    points_damage: set[str] = field(default_factory=set)  # jobs whose points are damaged
    derived_damage: set[str] = field(default_factory=set)  # jobs with damaged derived rows
    engine_damage: list[str] = field(default_factory=list)  # the engine's checker's lines
    repaired: list[str] = field(default_factory=list)  # jobs whose derived rows were rebuilt
    curve_numbers: dict[int, dict[str, object]] = field(default_factory=dict)  # to rewrite
    run_damage: set[str] = field(default_factory=set)  # jobs with a damaged run (re-ingest)
    stale_runs: list[StoredRun] = field(default_factory=list)  # checksums to make afresh

    @property
    def damaged_jobs(self) -> list[str]:
        return sorted({job for job, _ in self.damage})

    @property
    def clean(self) -> bool:
        """Nothing is left damaged (whatever was found was repaired)."""
        left = set(self.damaged_jobs) - set(self.repaired)
        return not left and not self.engine_damage

    def outcome_line(self) -> str:
        checked = f"checked {self.chunks} curve chunks and {self.summaries} summaries"
        engine = (
            f"; the database file is damaged ({len(self.engine_damage)} problems found by"
            " SQLite's integrity_check)"
            if self.engine_damage
            else ""
        )
        if not self.damage:
            return f"{checked}: no damage found{engine}"
        jobs = self.damaged_jobs
        repaired = (
            f"; derived rows rebuilt from the points: {', '.join(self.repaired)}"
            if self.repaired
            else ""
        )
        return f"{checked}: {len(jobs)} jobs damaged: {', '.join(jobs)}{repaired}{engine}"


def check_database(
    engine: Engine, repair: bool = False, on_repaired: Callable[[str], None] | None = None
) -> Checked:
    """Verify every chunk and every kept summary of the database at ``engine`` (and, on
    SQLite, its pages); with ``repair``, rebuild the derived rows of the jobs whose derived
    rows alone are damaged, one transaction per job (``on_repaired`` told each)."""
    checked = Checked()
    with Session(engine) as session:
        if engine.dialect.name == "sqlite":
            found = session.connection().exec_driver_sql("PRAGMA integrity_check").scalars()
            checked.engine_damage = [
                f"SQLite's integrity_check: {line}" for line in found if line != "ok"
            ]
        checked.chunks = session.scalar(select(func.count()).select_from(CurveChunk)) or 0
        curves = session.execute(
            select(Curve.id, Job.name)
            .join(Run, Run.id == Curve.run_id)
            .join(Job, Job.id == Run.job_id)
            .order_by(Job.name, Curve.id)
        ).all()
        for curve_id, job in curves:
            try:
                numbers, wrong = curve_numbers(session, curve_id, *read_curve(session, curve_id))
            except DamagedCurve as exc:
                checked.damage.append((job, str(exc)))
                checked.points_damage.add(job)
                continue
            if wrong is not None:
                checked.damage.append((job, str(wrong)))
                checked.curve_numbers[curve_id] = numbers
        job_ids = list(session.scalars(select(Job.id).order_by(Job.name)))
        damaged_runs, checked.stale_runs = runs_of(session, job_ids, checked.curve_numbers)
        for run in damaged_runs:
            checked.damage.append((run.fields["job"], str(run)))
            checked.run_damage.add(run.fields["job"])
        arms: dict[str, set[str]] = {}
        for job, arm in session.execute(select(Job.name, Run.arm).join(Run, Run.job_id == Job.id)):
            arms.setdefault(job, set()).add(arm)
        summaries = session.execute(
            select(Job.name, JobSummary.data).join(Job, Job.id == JobSummary.job_id)
        )
        for job, data in summaries:
            checked.summaries += 1
            try:
                summary = read_summary(job, data, not_drawn)
            except DamagedSummary as exc:
                checked.damage.append((job, str(exc)))
                checked.derived_damage.add(job)
                continue
            # a run's row deleted whole leaves no checksum to fail: its job's summary, made
            # from every run, still names it (rebuilding the summary would forget it)
            for arm in sorted(set(summary.curves) - arms.get(job, set())):
                gone = DamagedRun(job=job, arm=arm, reason="its row is gone; its summary names it")
                checked.damage.append((job, str(gone)))
                checked.run_damage.add(job)
        for job, data in session.execute(
            select(Job.name, JobIndex.grid_curves).join(Job, Job.id == JobIndex.job_id)
        ):
            try:
                read_grid_curves(job, data)
            except DamagedSummary as exc:
                if (job, str(exc)) not in checked.damage:  # said of its summary already
                    checked.damage.append((job, str(exc)))
                checked.derived_damage.add(job)
        said = {job for job, _ in checked.damage}
        for job_id, job, study in session.execute(select(Job.id, Job.name, Job.study)):
            differing: list[TrackerError | None] = [verdicts_of(session, job_id, job, study)]
            if job not in said:  # a run or curve found damaged: its own line says so
                differing.append(run_index_of(session, job_id, job))
            for differs in differing:
                if differs is not None:
                    checked.damage.append((job, str(differs)))
                    checked.derived_damage.add(job)
    if repair:
        _repair(engine, checked, on_repaired)
    return checked


def _repair(engine: Engine, checked: Checked, on_repaired: Callable[[str], None] | None) -> None:
    """Rewrite the curve numbers found wrong, then rebuild the derived rows of the jobs whose
    points are intact (the others need their files: a re-ingest)."""
    if checked.curve_numbers:

        def rewrite(session: Session) -> None:
            for curve_id, numbers in checked.curve_numbers.items():
                rewrite_curve_numbers(session, curve_id, numbers)
            stale = checked.stale_runs
            seal_runs(session, {run.job_id for run in stale}, {run.id for run in stale})

        transactions.in_write_transaction(engine, rewrite)
    rewritten = {job for job, _ in checked.damage} - checked.derived_damage
    lost = checked.points_damage | checked.run_damage  # their files are needed
    repairable = checked.derived_damage - lost
    rebuilt = rederive(engine, on_job=on_repaired, force=True, only=repairable).refilled
    checked.repaired = sorted((rewritten - lost) | set(rebuilt))

"""One job's page content from the database: what the report writes and the server serves,
rendered with ``tracker.views.pages`` (no file is written here)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from tracker.completeness import stopped_arms, summary_steps
from tracker.domain import LOSS
from tracker.figures import memory_scaling, table4
from tracker.figures.trajectories import trajectories_figure
from tracker.jsonio import format_time
from tracker.models import Job
from tracker.queries.job_analysis import study_judging, summary_of
from tracker.queries.selection import job_meta
from tracker.store.catalog import Row, get_job, jobs_by_id
from tracker.store.curves import Points, arm_points, arm_points_by_job
from tracker.store.jobdata import NO_PROBES, probes_by_job
from tracker.store.kept_rows import summaries_by_job
from tracker.store.raw_rows import JobStream
from tracker.store.run_rows import StoredRun, notes_of, verified_runs_by_job
from tracker.summary.model import DRAWN_KEPT_ABOVE
from tracker.summary.trajectories import TrajectoryDrawing, drawing_of_points
from tracker.summary.version import expectations_digest
from tracker.views.pages import JobFigure, JobView, figure_slot
from tracker.views.values import counts, failures_first

if TYPE_CHECKING:
    import polars as pl

    from tracker.analysis.expectations import Expectations
    from tracker.analysis.job import JobAnalysis
    from tracker.summary.grid import GridCurve
    from tracker.summary.model import Summary

# (file, title, height) of each figure, in page order
FIGURES: tuple[tuple[str, str, int], ...] = (
    ("mem_scaling", "Memory: bytes/param vs model size", 480),
    ("gpt_trajectories", "Training trajectories", 480),
    ("table4", "Table 4 extrapolation (Llama-3.1-8B)", 440),
)


def shown_figures(exp: Expectations) -> list[str]:
    """The figures of a job of this study: the memory figure where it claims something of
    memory, the Table 4 figure where that claim names Table 4."""
    checks = exp.memory_checks
    shown = {"mem_scaling": bool(checks), "gpt_trajectories": True, "table4": "table4" in checks}
    return [key for key, _, _ in FIGURES if shown[key]]


@dataclass(frozen=True)
class JobContent:
    view: JobView  # the job page and its figure pages
    analysis: JobAnalysis  # the script's JSON documents and the verdicts
    curves: dict[str, GridCurve]  # arm -> smoothed loss on a grid, for the figures across jobs
    probes: int
    arms: int
    curve_rows: list[Row]  # catalog.job_curves
    stopped: dict[str, str]  # arm -> how it stopped early, for the arms that did


def job_content(session: Session, name: str, exp: Expectations) -> JobContent:
    """One job's pages from its stored summary (tracker.store.kept_rows) and probes; a job
    without a summary for ``exp`` is analysed from its points."""
    return next(job_contents(session, [get_job(session, name).id], exp))


def job_contents(
    session: Session, job_ids: Iterable[int], exp: Expectations
) -> Iterator[JobContent]:
    """``job_content`` of each listed job, a job at a time in job id order: its rows read by a
    few statements whatever the number of jobs, streamed in job order, so that one job's
    points are held at a time (a job without a stored summary for its study reads its own)."""
    ids = sorted(job_ids)
    if not ids:
        return
    jobs = jobs_by_id(session, ids)
    meta = job_meta(session, ids)
    judging = {study: study_judging(session, exp, study) for study in {job.study for job in jobs}}
    digests = {study: expectations_digest(own) for study, own in judging.items()}
    # each stream's statement runs when its first job is taken: the runs first, as they are
    # checked before any point is read
    runs = JobStream(
        (job_runs[0].job_id, job_runs) for job_runs in verified_runs_by_job(session, ids)
    )
    summaries = JobStream(summaries_by_job(session, ids, digests.values()))
    probes = JobStream(probes_by_job(session, ids))
    points = JobStream(arm_points_by_job(session, ids, DRAWN_KEPT_ABOVE))
    for job in jobs:
        own = judging[job.study]
        stored = runs.take(job.id) or []
        data = (summaries.take(job.id) or {}).get(digests[job.study])
        draw = partial(_drawn, session, job.id, points.take(job.id), own)
        summary = summary_of(session, job.name, own, data, draw)
        found = probes.take(job.id)
        yield _content(
            job, meta.get(job.id, {}), own, summary, NO_PROBES if found is None else found, stored
        )


def _drawn(
    session: Session, job_id: int, points: Points | None, exp: Expectations
) -> TrajectoryDrawing:
    """A job's trajectories figure's lines from its loss curves' ``points`` (those streamed),
    else from its own read of them (a job of more points, whose lines are kept, has none)."""
    return drawing_of_points(arm_points(session, job_id) if points is None else points, exp)


def _content(
    job: Job,
    meta: dict[str, str],
    exp: Expectations,
    summary: Summary,
    probes: pl.DataFrame,
    stored: list[StoredRun],
) -> JobContent:
    """A job's content of its rows, ``exp`` its study's."""
    kept = notes_of(stored)
    runs = {run.id: (run.arm, run.extra) for run in stored}
    curve_rows: list[Row] = [
        {"arm": run.arm, "metric": metric, "points": n, "first_step": first, "last_step": last}
        for run in stored
        for metric, n, first, last, *_ in run.by_metric.values()
    ]
    analysis = summary.analysis
    arms = [arm for arm, _ in runs.values()]
    gpu = meta.get("gpu")
    shown = shown_figures(exp)
    draw = {
        "mem_scaling": lambda: memory_scaling(probes, exp, gpu=gpu),
        "gpt_trajectories": lambda: trajectories_figure(summary.trajectories, exp, gpu=gpu),
        "table4": lambda: table4(analysis.verdicts),
    }
    figures = {key: draw[key]() for key in shown}
    notes = [exp.missing] if exp.missing else list(analysis.notes)
    if exp.provenance:
        notes.append(exp.provenance)
    elif exp.digest and job.study_digest not in (None, exp.digest):
        own = job.study_digest
        notes.append(f"ingested with another definition of its study (digest {own:.12})")
    if probes.height == 0 and "mem_scaling" in shown:
        lacking = (
            "no memory figure and no Table 4 figure" if "table4" in shown else "no memory figure"
        )
        notes.append(f"no memory probes in this job: {lacking}")
    if not arms:
        notes.append("no training arms in this job: no trajectories figure")
    if not (exp.missing or exp.judges("memory") or exp.judges("training")):
        notes.append(
            f"the {exp.study_name} study checks no job alone: its claims judge the runs across jobs"
        )
    notes += [
        f"{arm}: {note}" for run_id, (arm, _) in runs.items() for note in kept.get(run_id, [])
    ]
    failed = int(probes.get_column("n_params").is_null().sum()) if probes.height else 0
    items = [
        ("job", job.name),
        ("ingested", format_time(job.ingested_at)),
        ("source", job.source_path),
        ("memory probes", f"{probes.height} ({failed} failed)"),
        ("training arms", ", ".join(arms) or "none"),
        ("loss values (steps, all arms)", f"{summary.steps:,}"),
    ]
    items += [(f"meta: {key}", value) for key, value in sorted(meta.items())]
    items.append(("expectations", exp.source))
    view = JobView(
        name=job.name,
        meta=items,
        notes=notes,
        tally=counts(analysis.verdicts),
        verdicts=failures_first(analysis.verdicts),
        figures=[
            JobFigure(f"{key}.html", title, figure_slot(figures[key], key, title, height))
            for key, title, height in FIGURES
            if key in figures
        ],
    )
    loss_ends = {row["arm"]: row["last_step"] for row in curve_rows if row["metric"] == LOSS}
    ends = {arm: (loss_ends.get(arm), summary_steps(extra)) for arm, extra in runs.values()}
    stopped = {arm: found.message for arm, found in stopped_arms(ends).items()}
    return JobContent(view, analysis, summary.curves, probes.height, len(arms), curve_rows, stopped)

"""One job's page content from the database: what the report writes, and what a server
can render with ``tracker.report.pages`` (no file is written here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.report.values import counts, failures_first

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from tracker.analysis.expectations import Expectations
    from tracker.analysis.job import JobAnalysis
    from tracker.figures.crossjob import GridCurve
    from tracker.models import Job
    from tracker.report.pages import JobView
    from tracker.store.jobdata import JobData

# (file, title, height) of each figure, in page order
FIGURES: tuple[tuple[str, str, int], ...] = (
    ("mem_scaling", "Memory: bytes/param vs model size", 480),
    ("gpt_trajectories", "Training trajectories", 480),
    ("table4", "Table 4 extrapolation (Llama-3.1-8B)", 440),
)


@dataclass(frozen=True)
class JobContent:
    view: JobView  # the job page and its figure pages
    analysis: JobAnalysis  # the script's JSON documents and the verdicts
    curves: dict[str, GridCurve]  # arm -> smoothed loss on a grid, for the figures across jobs
    probes: int
    arms: int


def job_content(session: Session, name: str, exp: Expectations) -> JobContent:
    """Load, analyse and draw one job (its curves are read once, each arm smoothed once)."""
    from tracker.analysis.job import analyze_job
    from tracker.analysis.smoothing import ema
    from tracker.figures import memory_scaling, table4, training_trajectories
    from tracker.figures.crossjob import grid_curve
    from tracker.report.pages import JobFigure, JobView, figure_slot
    from tracker.store.catalog import get_job
    from tracker.store.jobdata import load_job_data

    job = get_job(session, name)
    data = load_job_data(session, name)
    # the EMA of each arm, once: for the verdicts, the figure and the cross-job data
    smoothed = {
        arm: ema(frame.get_column("value"), exp.training.ema_alpha)
        for arm, frame in data.curves.items()
    }
    analysis = analyze_job(data, exp, smoothed)
    gpu = data.meta.get("gpu")
    figures = {
        "mem_scaling": memory_scaling(data.probes, exp, gpu=gpu),
        "gpt_trajectories": training_trajectories(data.curves, exp, gpu=gpu, smoothed=smoothed),
        "table4": table4(analysis.verdicts),
    }
    notes = list(analysis.notes)
    if data.probes.height == 0:
        notes.append("no memory probes in this job: no memory figure and no Table 4 figure")
    if data.runs.height == 0:
        notes.append("no training arms in this job: no trajectories figure")
    view = JobView(
        name=job.name,
        meta=_meta_items(job, data, exp),
        notes=notes,
        tally=counts(analysis.verdicts),
        verdicts=failures_first(analysis.verdicts),
        figures=[
            JobFigure(f"{key}.html", title, figure_slot(figures[key], key, title, height))
            for key, title, height in FIGURES
        ],
    )
    curves = {
        arm: grid_curve(
            frame.get_column("step").to_numpy(),
            smoothed[arm].to_numpy(),
            frame.get_column("value").to_numpy(),
        )
        for arm, frame in data.curves.items()
    }
    return JobContent(view, analysis, curves, data.probes.height, data.runs.height)


def _meta_items(job: Job, data: JobData, exp: Expectations) -> list[tuple[str, str]]:
    steps = sum(frame.height for frame in data.curves.values())
    failed = int(data.probes.get_column("n_params").is_null().sum()) if data.probes.height else 0
    items = [
        ("job", job.name),
        ("ingested", job.ingested_at.isoformat(timespec="seconds")),
        ("source", job.source_path),
        ("memory probes", f"{data.probes.height} ({failed} failed)"),
        ("training arms", ", ".join(data.runs.get_column("arm").to_list()) or "none"),
        ("loss values (steps, all arms)", f"{steps:,}"),
    ]
    items += [(f"meta: {key}", value) for key, value in sorted(data.meta.items())]
    items.append(("expectations", exp.source))
    return items

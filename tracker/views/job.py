"""One job's page content from the database: what the report writes and the server serves,
rendered with ``tracker.views.pages`` (no file is written here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from tracker.completeness import stopped_arms, summary_steps
from tracker.domain import LOSS
from tracker.figures import memory_scaling, table4
from tracker.figures.trajectories import trajectories_figure
from tracker.jsonio import format_time
from tracker.queries.job_analysis import load_summary, study_judging
from tracker.store.catalog import Row, get_job, run_curves
from tracker.store.jobdata import load_probes
from tracker.store.run_rows import checked_runs
from tracker.views.pages import JobFigure, JobView, figure_slot
from tracker.views.values import counts, failures_first

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations
    from tracker.analysis.job import JobAnalysis
    from tracker.summary.grid import GridCurve

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
    job = get_job(session, name)
    kept = checked_runs(session, [job.id])  # its runs' notes, checked before any point is read
    exp = study_judging(session, exp, job.study)
    summary = load_summary(session, job.id, exp, trajectories=True)
    analysis = summary.analysis
    probes = load_probes(session, job.id)
    runs, curve_rows = run_curves(session, job.id)
    arms = [arm for arm, _ in runs.values()]
    meta = {item.key: item.value for item in job.meta}
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

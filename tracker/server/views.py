"""What the pages and the API show, computed once per job content digest.

A job's digest is read (one indexed row) on every request, so a replaced or new job is
seen at once; the work behind it (analysis, figures, downsampled curves) is cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.models import Job
from tracker.store.catalog import get_job

if TYPE_CHECKING:
    from tracker.analysis.job import JobAnalysis
    from tracker.queries.compare import Comparison
    from tracker.report.html import FigureSlot
    from tracker.server.deps import Served

# (key, title, height) of a job page's figures, in page order
JOB_FIGURES: tuple[tuple[str, str, int], ...] = (
    ("mem_scaling", "Memory: bytes/param vs model size", 480),
    ("gpt_trajectories", "Training trajectories", 480),
    ("table4", "Table 4 extrapolation (Llama-3.1-8B)", 440),
)


@dataclass(frozen=True)
class JobView:
    name: str
    meta: dict[str, str]
    analysis: JobAnalysis
    slots: list[FigureSlot]
    notes: list[str]


def job_digest(session: Session, name: str) -> str:
    return get_job(session, name).content_digest


def digests(session: Session) -> tuple[tuple[str, str], ...]:
    """(name, digest) of every job: the key of results made from all of them."""
    query = select(Job.name, Job.content_digest).order_by(Job.name)
    return tuple((name, digest) for name, digest in session.execute(query))


def job_view(served: Served, session: Session, name: str) -> JobView:
    key = (name, job_digest(session, name))
    return served.job_views.get(key, lambda: _build_view(served, session, name, key))


def job_analysis(served: Served, session: Session, name: str) -> JobAnalysis:
    from tracker.analysis.job import analyze_job
    from tracker.store.jobdata import load_job_data

    key = (name, job_digest(session, name))
    return served.analyses.get(key, lambda: analyze_job(load_job_data(session, name), served.exp))


def comparison(served: Served, session: Session, a: str, b: str) -> Comparison:
    from tracker.queries.compare import compare_verdicts

    verdicts_a = job_analysis(served, session, a).verdicts
    verdicts_b = job_analysis(served, session, b).verdicts
    return compare_verdicts(a, verdicts_a, b, verdicts_b, served.exp)


def _build_view(served: Served, session: Session, name: str, key: Any) -> JobView:
    from tracker.analysis.job import analyze_job
    from tracker.figures import memory_scaling, table4, training_trajectories
    from tracker.report.html import figure_slot
    from tracker.store.jobdata import load_job_data

    data = load_job_data(session, name)
    analysis = served.analyses.get(key, lambda: analyze_job(data, served.exp))
    gpu = data.meta.get("gpu")
    figures = {
        "mem_scaling": memory_scaling(data.probes, served.exp, gpu=gpu),
        "gpt_trajectories": training_trajectories(data.curves, served.exp, gpu=gpu),
        "table4": table4(analysis.verdicts),
    }
    slots = [
        figure_slot(figures[figure], figure, title, height) for figure, title, height in JOB_FIGURES
    ]
    return JobView(name, dict(sorted(data.meta.items())), analysis, slots, list(analysis.notes))

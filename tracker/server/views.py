"""What the pages and the API show, computed once per job content digest.

A job's digest is read (one indexed row) on every request, so a replaced or new job is
seen at once; the work behind it (analysis, figures, downsampled curves) is cached. A job's
page is the report's own (``tracker.report.pages.JobView`` and its template).
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
    from tracker.report.pages import JobView
    from tracker.server.deps import Served


@dataclass(frozen=True)
class LiveJob:
    view: JobView  # what the report's job page shows
    analysis: JobAnalysis  # and the JSON files beside it


def job_href(name: str) -> str:
    """Where the server shows a job: the report's job folder, under /jobs/."""
    from urllib.parse import quote

    return f"/jobs/{quote(name, safe='')}/"


def job_digest(session: Session, name: str) -> str:
    return get_job(session, name).content_digest


def digests(session: Session) -> tuple[tuple[str, str], ...]:
    """(name, digest) of every job: the key of results made from all of them."""
    query = select(Job.name, Job.content_digest).order_by(Job.name)
    return tuple((name, digest) for name, digest in session.execute(query))


def job_list(served: Served, session: Session) -> list[dict[str, Any]]:
    """``list_jobs``, kept until a job is added, replaced or deleted (metadata only changes
    with a job's content: re-ingesting the same content is a no-op)."""
    from tracker.store.catalog import list_jobs

    return served.summaries.get(("jobs", digests(session)), lambda: list_jobs(session))


def live_job(served: Served, session: Session, name: str) -> LiveJob:
    key = (name, job_digest(session, name))
    return served.job_views.get(key, lambda: _build(served, session, name, key))


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


def _build(served: Served, session: Session, name: str, key: tuple[str, str]) -> LiveJob:
    """The report's job view, made as ``tracker report`` makes it (``writer._render_job``)."""
    from tracker.analysis.job import analyze_job
    from tracker.analysis.smoothing import ema
    from tracker.figures import memory_scaling, table4, training_trajectories
    from tracker.report.pages import JobFigure, JobView, figure_slot
    from tracker.report.values import counts, failures_first
    from tracker.report.writer import FIGURES, _meta_items
    from tracker.store.jobdata import load_job_data

    exp = served.exp
    job = get_job(session, name)
    data = load_job_data(session, name)
    smoothed = {
        arm: ema(frame.get_column("value"), exp.training.ema_alpha)
        for arm, frame in data.curves.items()
    }
    analysis = served.analyses.get(key, lambda: analyze_job(data, exp, smoothed))
    gpu = data.meta.get("gpu")
    figures = {
        "mem_scaling": memory_scaling(data.probes, exp, gpu=gpu),
        "gpt_trajectories": training_trajectories(data.curves, exp, gpu=gpu, smoothed=smoothed),
        "table4": table4(analysis.verdicts),
    }
    notes = list(analysis.notes)
    view = JobView(
        name=name,
        meta=_meta_items(job, data, exp),
        notes=notes,
        tally=counts(analysis.verdicts),
        verdicts=failures_first(analysis.verdicts),
        figures=[
            JobFigure(f"{figure}.html", title, figure_slot(figures[figure], figure, title, height))
            for figure, title, height in FIGURES
        ],
    )
    return LiveJob(view, analysis)

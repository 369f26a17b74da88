"""What the pages and the API show, computed once per job content digest.

A job's digest is read (one indexed row) on every request, so a replaced or new job is
seen at once; the work behind it (analysis, figures, downsampled curves) is cached. A job's
page is the report's own (``tracker.views.pages.JobView`` and its template).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.models import Job
from tracker.store.catalog import get_job
from tracker.views.job import JobContent, job_content

if TYPE_CHECKING:
    from tracker.analysis.job import JobAnalysis
    from tracker.queries.compare import Comparison
    from tracker.server.deps import Served


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


def live_job(served: Served, session: Session, name: str) -> JobContent:
    """The report's content of one job page (``tracker.views.job``), and its analysis."""
    key = (name, job_digest(session, name))

    def build() -> JobContent:
        content = job_content(session, name, served.exp)
        served.analyses.get(key, lambda: content.analysis)
        return content

    return served.job_views.get(key, build)


def job_analysis(served: Served, session: Session, name: str) -> JobAnalysis:
    from tracker.queries.derived import load_summary

    job = get_job(session, name)
    return served.analyses.get(
        (name, job.content_digest),
        lambda: load_summary(session, job.id, served.exp).analysis,
    )


def comparison(served: Served, session: Session, a: str, b: str) -> Comparison:
    from tracker.queries.compare import compare_verdicts

    verdicts_a = job_analysis(served, session, a).verdicts
    verdicts_b = job_analysis(served, session, b).verdicts
    return compare_verdicts(a, verdicts_a, b, verdicts_b, served.exp)

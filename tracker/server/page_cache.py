"""What the pages and the API show, computed once per state of the jobs it is made from.

A cache key names the state of every job a result depends on: its content digest, its
metadata, and the rest of its row (ingest time, source). These are read on every request
(one indexed query) in the request's own snapshot, the same one the result is computed from,
so a replaced or new job, a re-ingest with new ``--meta`` and ``tracker meta`` are all seen
at once; the work behind a key (analysis, figures, downsampled curves) is cached. A job's
page is the report's own (``tracker.views.pages.JobView`` and its template).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import polars as pl
from sqlalchemy import Select, String, cast, select
from sqlalchemy.orm import Session

from tracker.analysis.job import JobAnalysis
from tracker.jsonio import to_stored_json
from tracker.models import Job, JobMeta
from tracker.queries.compare import Comparison, compare_in_study
from tracker.queries.job_analysis import load_summary
from tracker.queries.selection import JobSelection
from tracker.queries.yardsticks import KeptVerdicts, Where, kept_verdicts
from tracker.store import catalog
from tracker.store.catalog import get_job
from tracker.store.raw_rows import plain_rows
from tracker.views.job import JobContent, job_content

# name, content digest, ingest time, source, then a metadata key and value (None if none)
StateQuery = Select[str, str, str, str, str, str]

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations
    from tracker.server.deps import Served


def job_href(name: str) -> str:
    """Where the server shows a job: the report's job folder, under /jobs/."""
    return f"/jobs/{quote(name, safe='')}/"


def _states(session: Session, query: StateQuery) -> dict[str, str]:
    """Each job's name and a digest of its row and metadata, in name order."""
    rows: dict[str, list[str | None]] = {}
    for name, *state in plain_rows(session, query):
        rows.setdefault(name, []).extend(state)
    return {name: _digest(state) for name, state in rows.items()}


def _digest(parts: Sequence[str | None] | Sequence[Sequence[str | None]]) -> str:
    # as JSON: no two different lists give the same text
    return hashlib.sha256(to_stored_json(parts).encode()).hexdigest()


def _state_query() -> StateQuery:
    return (
        select(
            Job.name,
            Job.content_digest,
            cast(Job.ingested_at, String),  # as the database writes it: no time made a row
            Job.source_path,
            JobMeta.key,
            JobMeta.value,
        )
        .outerjoin(JobMeta, JobMeta.job_id == Job.id)
        .order_by(Job.name, JobMeta.key)
    )


def job_state(session: Session, name: str) -> str:
    """The key of what is made from one job: changes with its content and its metadata."""
    states = _states(session, _state_query().where(Job.name == name))
    if name not in states:
        get_job(session, name)  # not stored: raises UnknownJob, naming the stored ones
    return states[name]


def job_digest(session: Session, name: str) -> str:
    """The content digest of one job: the key of what is made from its content alone."""
    return get_job(session, name).content_digest


def catalog_state(session: Session) -> str:
    """The key of results made from every job: changes with any job's content or metadata,
    and when a job is added or deleted."""
    return _digest(plain_rows(session, _state_query()))  # one digest of every row at once


def job_list(served: Served, session: Session) -> list[dict[str, Any]]:
    """``list_jobs``, kept until a job is added, replaced, deleted or its metadata changes."""
    return served.across_jobs.get(
        ("jobs", catalog_state(session)), lambda: catalog.list_jobs(session, served.study)
    )


def live_job(served: Served, session: Session, name: str) -> JobContent:
    """The report's content of one job page (``tracker.views.job``), and its analysis."""
    key = (name, job_state(session, name))

    def build() -> JobContent:
        content = job_content(session, name, served.exp)
        served.analyses.get(key, lambda: content.analysis)
        return content

    return served.job_views.get(key, build)


def job_analysis(served: Served, session: Session, name: str) -> JobAnalysis:
    job = get_job(session, name)
    return served.analyses.get(
        (name, job_state(session, name)),
        lambda: load_summary(session, job.id, served.exp).analysis,
    )


def comparison(
    served: Served, session: Session, a: str, b: str, where: Where | None = None
) -> Comparison:
    """``tracker compare``'s comparison (against the jobs of the second one's study, by its
    gate); ``where``: its ``--baseline-where``."""
    verdicts_a = job_analysis(served, session, a).verdicts
    verdicts_b = job_analysis(served, session, b).verdicts
    study = get_job(session, b).study
    keeping = ServerKeeping(served, catalog_state(session))

    def kept(gate: Expectations) -> KeptVerdicts:
        return keeping.kept_verdicts(study, lambda: kept_verdicts(session, gate, study))

    return compare_in_study(
        session, served.exp, (a, verdicts_a), (b, verdicts_b), study, kept, where
    )


class ServerKeeping:
    """What pages work out across jobs, kept for the other pages of the same ``state`` of the
    jobs (``catalog_state``): the claims of a selection, the kept verdicts of a study."""

    def __init__(self, served: Served, state: str) -> None:
        self.served, self.state = served, state

    def claims(self, selection: JobSelection, judge: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        return self.served.across_jobs.get(("claims", self.state, selection), judge)

    def kept_verdicts(self, study: str, read: Callable[[], KeptVerdicts]) -> KeptVerdicts:
        return self.served.across_jobs.get(("kept verdicts", self.state, study), read)

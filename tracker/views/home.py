"""What the live server's home page and claims page show, built as the report's index is:
the same jobs table (with its verdict counts), the same section across jobs, the same claims
table. The server sorts the jobs table by the column the URL names (``sort_rows``); the
claims templates order them (``tracker.views.values.claim_rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from tracker.domain import Status
from tracker.jsonio import format_time
from tracker.queries.claims import claims
from tracker.queries.job_analysis import load_derived, load_summary
from tracker.queries.selection import Selection, contents_and_meta, selected_jobs
from tracker.store.catalog import list_jobs
from tracker.views.across_jobs import cross_job_view
from tracker.views.pages import IndexView, JobRow, meta_text, status_of
from tracker.views.values import JOB_STATUSES, counts, status_key

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations


def _tally_of(status: str) -> Callable[[JobRow], int]:
    return lambda row: row.tally.get(status, 0)


# The jobs table's sortable columns: URL name -> what a row is sorted by.
JOB_SORTS: dict[str, Callable[[JobRow], Any]] = {
    "job": lambda row: row.name,
    "time": lambda row: row.time,
    **{status_key(status): _tally_of(status) for status in JOB_STATUSES},
    "probes": lambda row: row.probes,
    "arms": lambda row: row.arms,
    "metadata": lambda row: row.meta,
}


def live_index(session: Session, exp: Expectations, job_href: Callable[[str], str]) -> IndexView:
    """The report's index content of every job, read from the database: verdict counts from
    the verdicts kept at ingest, the figures across jobs from the kept summaries."""
    ordered = selected_jobs(session, Selection())
    ids: list[int] = ordered.get_column("job_id").to_list()
    names: list[str] = ordered.get_column("job").to_list()
    derived = load_derived(session, ids, exp)
    _, meta = contents_and_meta(session, ids)
    listed = {row["job"]: row for row in list_jobs(session)}
    rows = []
    for job_id, name, time in reversed(ordered.select("job_id", "job", "time").rows()):
        tally = counts(derived[job_id].verdicts)
        rows.append(
            JobRow(
                name=name,
                href=job_href(name),
                time=format_time(time),
                tally=tally,
                probes=listed[name]["probes"],
                arms=listed[name]["arms"],
                meta=meta_text(meta.get(job_id, {})),
                status=status_of(tally),
            )
        )
    curves = {
        name: load_summary(session, job_id, exp).curves
        for job_id, name in zip(ids, names, strict=True)
    }
    latest = [derived[i].verdicts for i in ids[-2:]]
    folders = {name: job_href(name).rstrip("/") for name in names}
    cross = cross_job_view(
        session, ordered, folders, curves, (latest[0], latest[-1]) if latest else ([], []), exp
    )
    return IndexView(
        rows=rows,
        tally={s: sum(row.tally.get(s, 0) for row in rows) for s in Status},
        failing=sum(row.tally.get(Status.FAIL, 0) > 0 for row in rows),
        cross=cross,
        claims=(claims(session, Selection(), exp, jobs=ordered).to_dicts()),
    )


def sort_rows(rows: Sequence[JobRow], column: str, descending: bool) -> list[JobRow]:
    """The jobs table sorted by one of ``JOB_SORTS``; ties keep the newest first."""
    return sorted(rows, key=JOB_SORTS[column], reverse=descending)

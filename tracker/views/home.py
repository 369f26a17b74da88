"""The index, the report's and the live server's home page alike: the jobs table (with its
verdict counts), the section across jobs, the claims table. The report makes each job's
entry from the page it renders or keeps; the server from the rows kept at ingest
(``live_index``). The server sorts the jobs table by the column the URL names
(``sort_rows``); the claims templates order them (``tracker.views.values.claim_rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlalchemy.orm import Session

from tracker.analysis.study_looks import study_heading
from tracker.domain import Status
from tracker.jsonio import TIME_FORMAT
from tracker.queries.claims import claims
from tracker.queries.job_analysis import load_derived, load_index_numbers, study_of
from tracker.queries.selection import JobSelection, job_meta, selected_jobs
from tracker.queries.yardsticks import VerdictValues
from tracker.store.catalog import job_counts, job_studies
from tracker.views.across_jobs import cross_job_view, drawn_jobs
from tracker.views.keeping import NOWHERE, Keeping
from tracker.views.pages import CLAIMS_MISSING, IndexView, JobRow, meta_text, status_of
from tracker.views.values import JOB_STATUSES, status_key

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations
    from tracker.analysis.verdict import Verdict
    from tracker.summary.grid import GridCurve


@dataclass(frozen=True)
class IndexEntry:
    """What the index shows of one job besides its name, time and metadata."""

    href: str  # its page
    folder: str  # its page's folder, for the links of the section across jobs
    tally: Mapping[str, int]  # its verdicts of each status
    probes: int
    arms: int
    curves: Mapping[str, GridCurve]  # arm -> smoothed loss on a grid (as its page drew it)


def latest_verdicts(
    session: Session, ids: Sequence[int], exp: Expectations
) -> tuple[Sequence[Verdict], Sequence[Verdict]]:
    """The two latest jobs' verdicts as kept at ingest (as ``tracker compare`` reads them)."""
    derived = load_derived(session, list(ids[-2:]), exp)
    latest = [derived[job_id].verdicts for job_id in ids[-2:]]
    return (latest[0], latest[-1]) if latest else ([], [])


def index_view(
    session: Session,
    ordered: pl.DataFrame,
    entries: Mapping[str, IndexEntry],
    meta: Mapping[str, Mapping[str, str]],
    exp: Expectations,
    selection: JobSelection,
    claims_note: str = CLAIMS_MISSING,
    keeping: Keeping = NOWHERE,
) -> IndexView:
    """What the index shows of the ``ordered`` jobs (``selected_jobs``); ``meta``: name ->
    the job's metadata; ``keeping``: where its claims and yardstick are kept for other pages."""
    # every job's time written at once (``format_time``'s text): a call a job is 10,000 calls
    shown = ordered.select("job", pl.col("time").dt.strftime(TIME_FORMAT))  # times in UTC
    rows = [
        JobRow(
            name=name,
            href=entries[name].href,
            time=time,
            tally=dict(entries[name].tally),
            probes=entries[name].probes,
            arms=entries[name].arms,
            meta=meta_text(meta.get(name, {})),
            status=status_of(entries[name].tally),
        )
        for name, time in reversed(shown.rows())
    ]
    folders = {name: entry.folder for name, entry in entries.items()}
    curves = {name: entry.curves for name, entry in entries.items()}
    ids = ordered.get_column("job_id").to_list()
    latest = latest_verdicts(session, ids, exp)
    studies = job_studies(session, ids) or [selection.study or exp.study_name]
    # .get: a manifest entry of an older tracker may lack a status (KNOWN)
    tally: dict[str, int] = {s: sum(row.tally.get(s, 0) for row in rows) for s in Status}
    # every job's verdicts read once: the claims hand them to the comparison's yardstick
    read = VerdictValues()
    table = keeping.claims(
        selection, lambda: claims(session, selection, exp, jobs=ordered, each_batch=read.add)
    )
    return IndexView(
        rows=rows,
        tally=tally,
        failing=sum(row.tally.get(Status.FAIL, 0) > 0 for row in rows),
        cross=cross_job_view(session, ordered, folders, curves, latest, exp, read, keeping),
        claims=table.to_dicts(),
        claims_note=claims_note,
        heading=study_heading({study: study_of(session, study) for study in studies}),
    )


def live_index(
    session: Session,
    exp: Expectations,
    job_href: Callable[[str], str],
    study: str | None = None,
    keeping: Keeping = NOWHERE,
) -> IndexView:
    """The index of every job (of ``study``, or all), read from the database: verdict counts
    from the verdicts kept at ingest, the figures across jobs from the kept summaries;
    ``keeping``: as ``index_view``'s."""
    selection = JobSelection(study=study)
    ordered = selected_jobs(session, selection)
    ids: list[int] = ordered.get_column("job_id").to_list()
    names: list[str] = ordered.get_column("job").to_list()
    drawn = drawn_jobs(ordered).get_column("job_id").to_list()
    tallies, curves = load_index_numbers(session, ids, exp, drawn)
    meta = job_meta(session, ids)
    counts = job_counts(session, ids)  # their runs are checked by the claims and the seeds table
    hrefs = {name: job_href(name) for name in names}
    entries = {
        name: IndexEntry(
            href=hrefs[name],
            folder=hrefs[name].rstrip("/"),
            tally=tallies[job_id],
            probes=counts.get(job_id, (0, 0))[0],
            arms=counts.get(job_id, (0, 0))[1],
            curves=curves.get(job_id, {}),  # (of the jobs drawn across jobs)
        )
        for job_id, name in zip(ids, names, strict=True)
    }
    by_name = {name: meta.get(job_id, {}) for job_id, name in zip(ids, names, strict=True)}
    return index_view(session, ordered, entries, by_name, exp, selection, keeping=keeping)


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


def sort_rows(rows: Sequence[JobRow], column: str, descending: bool) -> list[JobRow]:
    """The jobs table sorted by one of ``JOB_SORTS``; ties keep the newest first."""
    return sorted(rows, key=JOB_SORTS[column], reverse=descending)


@dataclass(frozen=True)
class JobsPage:
    """One page of the jobs table, as the server shows it: of the rows that match a filter."""

    rows: list[JobRow]
    text: str  # the filter's words
    status: str  # the rows' status it asks for ("": any)
    first: int  # the first row's place among those matching, from 1 (0: none match)
    matching: int
    total: int
    page: int  # from 1
    pages: int


def jobs_page(rows: Sequence[JobRow], text: str, status: str, page: int, size: int) -> JobsPage:
    """Page ``page`` (the last if past it) of ``size`` rows of those whose name, time and
    metadata hold every word of ``text`` (case aside) and, when given, of ``status``."""
    words = text.lower().split()
    matching = [
        row
        for row in rows
        if (not status or row.status == status)
        and all(word in f"{row.name} {row.time} {row.meta}".lower() for word in words)
    ]
    pages = max(1, -(-len(matching) // size))
    page = min(page, pages)
    start = (page - 1) * size
    shown = matching[start : start + size]
    first = start + 1 if shown else 0
    return JobsPage(shown, text, status, first, len(matching), len(rows), page, pages)

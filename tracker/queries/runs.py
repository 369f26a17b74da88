"""The runs table: one row per arm across the selected jobs, with the job's verdict counts and
its metadata as columns, to sort, filter, page and pick from (``/runs``, ``/api/runs``).

Reads summary rows only: ``run``, the loss ``curve``'s kept summary (``steps``: how many steps
it logged, the count the page shows; ``last_step``: the last of them; its last value, lowest
finite value, how many points are NaN or infinite), ``job_meta`` and the stored
``job_index`` rows of one expectations digest (verdicts, for a job without one); never a curve
point. ``last_loss`` is NaN or infinite when the run ended blown up; ``nonfinite`` counts such
points anywhere on the loss curve (a run that blew up and recovered, or logged a few NaN
steps).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import polars as pl
from sqlalchemy.orm import Session

from tracker.domain import Status
from tracker.errors import UnknownColumn, UnknownStatus, known_names
from tracker.queries.selection import JobSelection, job_meta, selected_jobs
from tracker.queries.tables import arm_rows, with_jobs
from tracker.store.catalog import check_meta_keys
from tracker.store.index_rows import stored_counts
from tracker.store.kept_rows import stored_rows

STATUSES = tuple(str(status) for status in Status)  # a count column per verdict status
RUN_COLUMNS = (
    "job",
    "time",
    "arm",
    "model",
    "variant",
    "seed",
    "steps",
    "last_step",
    "stopped",
    "final_loss",
    "min_loss",
    "last_loss",
    "nonfinite",
    "val_loss",
    "diverged",
    "notes",
    *STATUSES,
)
META_PREFIX = "meta."  # a metadata key named as a column above is shown as meta.KEY
TEXT_COLUMNS = ("job", "arm", "model", "variant", "notes")  # what ``q`` searches, with metadata


@dataclass(frozen=True)
class RunsView:
    """How the table is shown: ``sort`` a column (``-col``: descending), ``q`` text that a
    row's job, arm, model, variant or metadata holds (case-insensitive), ``verdict`` a status
    the row's job has at least one of, ``columns`` the columns kept (all when empty)."""

    sort: str | None = None
    q: str = ""
    verdict: str | None = None
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunsPage:
    """``rows`` from ``offset`` on, of ``total`` matching rows."""

    rows: pl.DataFrame
    total: int
    offset: int


def meta_column(key: str) -> str:
    return f"{META_PREFIX}{key}" if key in RUN_COLUMNS else key


def _verdict_counts(session: Session, job_ids: list[int], digest: str) -> pl.DataFrame:
    """Per job, how many stored verdicts have each status (a job without stored verdicts for
    ``digest`` has no row: its counts are null, not zero): from its index row (its counts'
    checksum checked), else (kept before them) from its verdict rows, checked as every read of
    them is (``stored_rows``: their checksum)."""
    found = stored_counts(session, job_ids, digest)
    missing = [job_id for job_id in job_ids if job_id not in found]
    _numbers, rows = stored_rows(session, missing, digest) if missing else ({}, [])
    tally = Counter((row[0], row[6]) for row in rows)
    for job_id in sorted({row[0] for row in rows}):
        found[job_id] = {status: tally[job_id, status] for status in STATUSES}
    judged = sorted(found)
    columns = {status: [found[job_id][status] for job_id in judged] for status in STATUSES}
    schema = {"job_id": pl.Int64, **dict.fromkeys(STATUSES, pl.Int64)}
    return pl.DataFrame({"job_id": judged, **columns}, schema=schema)


def _meta_frame(session: Session, job_ids: list[int]) -> pl.DataFrame:
    """One row per job, one text column per metadata key any of them has (sorted by key)."""
    meta = job_meta(session, job_ids)
    keys = sorted({key for own in meta.values() for key in own})
    schema = {"job_id": pl.Int64, **{meta_column(key): pl.String for key in keys}}
    rows = [[job_id, *(meta.get(job_id, {}).get(key) for key in keys)] for job_id in job_ids]
    return pl.DataFrame(rows, schema=schema, orient="row")


def run_table(session: Session, selection: JobSelection, digest: str) -> pl.DataFrame:
    """The runs table of ``tracker query runs``, ``/runs`` and ``/api/runs``: every arm of the
    selected jobs in job order (then variant, seed), ``RUN_COLUMNS``, then one column per
    metadata key (a key to group by must be one: each is a column anyway). ``digest``: the
    expectations whose stored verdicts are counted
    (``tracker.summary.version.expectations_digest``)."""
    check_meta_keys(session, selection.group_by)
    jobs = selected_jobs(session, without_groups(selection))
    job_ids = jobs["job_id"].to_list()
    for per_job in (_verdict_counts(session, job_ids, digest), _meta_frame(session, job_ids)):
        jobs = jobs.join(per_job, on="job_id", how="left", maintain_order="left")
    table = with_jobs(jobs, arm_rows(session, selection, job_ids))
    return table.select(*RUN_COLUMNS, *(c for c in table.columns if c not in RUN_COLUMNS))


def without_groups(selection: JobSelection) -> JobSelection:
    """The selection without groupings: every metadata key is a column of the table anyway."""
    return replace(selection, group_by=())


def _known(table: pl.DataFrame, name: str) -> str:
    if name not in table.columns:
        raise UnknownColumn(name=name, known=known_names(table.columns, near=name))
    return name


def _matching(table: pl.DataFrame, view: RunsView) -> pl.DataFrame:
    if view.verdict is not None:
        if view.verdict not in STATUSES:
            raise UnknownStatus(status=view.verdict, known=", ".join(STATUSES))
        table = table.filter(pl.col(view.verdict) > 0)
    words = view.q.lower().split()
    if words:
        searched = [*TEXT_COLUMNS, *table.columns[len(RUN_COLUMNS) :]]
        text = pl.concat_str([pl.col(c).fill_null("") for c in searched], separator="\n")
        text = text.str.to_lowercase()
        table = table.filter(pl.all_horizontal(text.str.contains(w, literal=True) for w in words))
    return table


def arrange(table: pl.DataFrame, view: RunsView) -> pl.DataFrame:
    """The rows ``view`` keeps, in its order (stable: ties stay in job order; missing values
    last either way), with its columns."""
    columns = [_known(table, name) for name in view.columns] or table.columns
    table = _matching(table, view)
    if view.sort:
        name = _known(table, view.sort.removeprefix("-"))
        descending = view.sort.startswith("-")
        table = table.sort(name, descending=descending, nulls_last=True, maintain_order=True)
    return table.select(columns)


def runs_page(table: pl.DataFrame, view: RunsView, offset: int, limit: int | None) -> RunsPage:
    """One page of the arranged table (every row from ``offset`` on when ``limit`` is None),
    and how many rows match in all."""
    arranged = arrange(table, view)
    return RunsPage(arranged.slice(offset, limit), arranged.height, offset)

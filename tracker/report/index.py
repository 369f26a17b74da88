"""The report's index: the jobs table, the section across jobs and the claims, from the
entries of the jobs' pages (rendered now or kept from an earlier report)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from sqlalchemy.orm import Session

from tracker.analysis.expectations import Expectations
from tracker.analysis.verdict import Verdict
from tracker.domain import Status
from tracker.jsonio import format_time, to_json
from tracker.queries.claims import claims
from tracker.queries.job_analysis import load_derived
from tracker.queries.selection import Selection
from tracker.report.files import CLAIMS, INDEX, PLOTLY_JS, plotly_js, write_if_changed, write_text
from tracker.summary.grid import GridCurve
from tracker.views.across_jobs import cross_job_view, job_href
from tracker.views.pages import IndexView, JobRow, index_page, meta_text, status_of

CLAIMS_NONE = "No claim could be judged: no job of this report has what they need."


def latest_verdicts(
    session: Session, ids: Sequence[int], exp: Expectations
) -> tuple[Sequence[Verdict], Sequence[Verdict]]:
    """The two latest jobs' verdicts as kept at ingest (as ``tracker compare`` reads them)."""
    derived = load_derived(session, list(ids[-2:]), exp)
    latest = [derived[job_id].verdicts for job_id in ids[-2:]]
    return (latest[0], latest[-1]) if latest else ([], [])


def table_rows(
    ordered: pl.DataFrame,
    folders: Mapping[str, str],
    entries: Mapping[str, Mapping[str, Any]],
    meta: Mapping[str, Mapping[str, str]],
) -> list[JobRow]:
    """The jobs table, newest first."""
    return [
        JobRow(
            name=name,
            href=job_href(folders, name),
            time=format_time(time),
            tally=entries[name]["tally"],
            probes=entries[name]["probes"],
            arms=entries[name]["arms"],
            meta=meta_text(meta.get(name, {})),
            status=status_of(entries[name]["tally"]),
        )
        for name, time in reversed(ordered.select("job", "time").rows())
    ]


def index_view(
    session: Session,
    ordered: pl.DataFrame,
    folders: Mapping[str, str],
    entries: Mapping[str, Mapping[str, Any]],
    meta: Mapping[str, Mapping[str, str]],
    exp: Expectations,
    selection: Selection,
) -> IndexView:
    """What the index shows of the ``ordered`` jobs (``selected_jobs``); ``meta``: name ->
    the job's metadata."""
    names: list[str] = ordered.get_column("job").to_list()
    curves = {
        name: {arm: GridCurve.from_json(doc) for arm, doc in entries[name]["curves"].items()}
        for name in names
    }
    latest = latest_verdicts(session, ordered.get_column("job_id").to_list(), exp)
    cross = cross_job_view(session, ordered, folders, curves, latest, exp)
    rows = table_rows(ordered, folders, entries, meta)
    # .get: a manifest entry of an older tracker may lack a status (KNOWN)
    tally: dict[str, int] = {s: sum(row.tally.get(s, 0) for row in rows) for s in Status}
    return IndexView(
        rows=rows,
        tally=tally,
        failing=sum(row.tally.get(Status.FAIL, 0) > 0 for row in rows),
        cross=cross,
        claims=claims(session, selection, exp, jobs=ordered).to_dicts(),
        claims_note=CLAIMS_NONE,
    )


def write_index(out_dir: Path, view: IndexView, generated: str, exp: Expectations) -> Path:
    """plotly.js and ``claims.json`` (each when changed), then ``index.html``."""
    write_if_changed(out_dir / PLOTLY_JS, plotly_js())
    write_if_changed(out_dir / CLAIMS, (to_json(list(view.claims)) + "\n").encode("utf-8"))
    index = out_dir / INDEX
    write_text(index, index_page(view, generated, exp.source, plotly_src=PLOTLY_JS))
    return index

"""``tracker report``: analyse jobs from the database and write an offline HTML report.

Layout of ``DIR``::

    index.html             summary: claims across the jobs, the jobs table (filters and pages
                           in the browser), the figures across jobs, the latest comparison
    claims.json            the claims across the jobs (tracker.queries.claims), one per row
    manifest.json          what each job's pages were made from, and the cross-job data kept
                           from them (verdict counts, smoothed curves on a grid)
    plotly.min.js          written once; every page links it by a relative path (no CDN)
    <job>/index.html       the job page: metadata, notes, verdicts (failures first), figures
    <job>/mem_analysis.json, gpt_analysis.json, verdicts.json   (strict JSON, NaN -> null)
    <job>/mem_scaling.html, gpt_trajectories.html, table4.html  (one figure each)

Incremental: a job's pages are keyed by its content digest, its metadata, the expectations
and the tracker's version; a report into a folder that holds one renders only the jobs whose
key changed (``force`` renders all), always the index, and removes the folders of jobs deleted
from the database (``prune``: of every job not in this report; the others' pages stay, and
their manifest entries with them, so that links to them keep working). A folder that holds
files but no manifest is someone else's: refused unless ``force``. Many jobs are rendered
by two processes.

Curves are smoothed and checked on all their points; only the drawn traces are downsampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.orm import Session

import tracker
from tracker.analysis.expectations import Expectations
from tracker.errors import NotADirectory, NotAReportFolder, ReportFailed
from tracker.jsonio import format_time
from tracker.queries.job_analysis import job_studies, study_judging
from tracker.queries.selection import JobSelection, contents_and_meta, selected_jobs
from tracker.report.cleanup import remove_unused
from tracker.report.files import INDEX, MANIFEST, job_folders
from tracker.report.index import CLAIMS_NONE, index_entries, write_index
from tracker.report.manifest import (
    MANIFEST_FORMAT,
    expectations_key,
    kept_entries,
    page_key,
    read_manifest,
    write_manifest,
)
from tracker.report.render import Task, render_all
from tracker.store.copy import job_names
from tracker.store.run_rows import checked_runs
from tracker.views.home import index_view


@dataclass(frozen=True)
class JobReport:
    """What the report holds for one job, for the command line to print."""

    job: str
    page: Path  # DIR/<job>/index.html
    counts: dict[str, int]  # PASS / FAIL / KNOWN / N/A
    notes: list[str] = field(default_factory=list)
    rendered: bool = True  # False: its pages were up to date and kept


@dataclass(frozen=True)
class Report:
    index: Path  # DIR/index.html
    jobs: list[JobReport]
    removed: list[str] = field(default_factory=list)  # folders of jobs deleted (or pruned)

    def outcome_line(self) -> str:
        rendered = [job for job in self.jobs if job.rendered]
        lines = [
            f"{len(rendered)} job pages rendered, {len(self.jobs) - len(rendered)} up to date"
            + (f", {len(self.removed)} removed" if self.removed else ""),
            f"report: {self.index.resolve()}",
        ]
        return "\n".join(lines)


def generate_report(
    session: Session,
    out_dir: Path,
    exp: Expectations,
    selection: JobSelection | None = None,
    *,
    force: bool = False,
    prune: bool = False,
) -> Report:
    """Write the report of the selected jobs (all by default) under ``out_dir``.

    Only jobs whose pages are missing or out of date are rendered (all with ``force``). The
    pages of jobs deleted from the database are removed (with ``prune``, of every job not
    selected); a non-empty ``out_dir`` without a report's manifest is refused
    (``NotAReportFolder``) unless ``force``.
    The claims across the selected jobs (``tracker.queries.claims``) are shown on the index
    and written to ``claims.json``. Raises ``JobNotFound`` for an unknown job
    name before writing anything, ``NotADirectory`` when ``out_dir`` exists as something
    else than a directory, and ``ReportFailed`` when a file cannot be written (a full disk).
    """
    try:
        return _write_report(session, Path(out_dir), exp, selection or JobSelection(), force, prune)
    except OSError as exc:  # a full disk, mostly; the manifest, written last, is not updated
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReportFailed(directory=out_dir, reason=reason) from None


def _write_report(
    session: Session,
    out_dir: Path,
    exp: Expectations,
    selection: JobSelection,
    force: bool,
    prune: bool,
) -> Report:
    ordered = selected_jobs(session, selection)
    # every run its pages show, whether or not they are written again (pages of jobs unchanged
    # are kept: a run damaged since would go unseen)
    checked_runs(session, ordered.get_column("job_id").to_list())
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectory(path=str(out_dir))
    foreign = out_dir.is_dir() and not (out_dir / MANIFEST).exists() and any(out_dir.iterdir())
    if foreign and not force:
        raise NotAReportFolder(path=str(out_dir))
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (out_dir / MANIFEST).exists():  # the folder is a report's before any page is in it:
        write_manifest(out_dir, expectations_key(exp), {})  # a run cut short is taken up again
    names: list[str] = ordered.get_column("job").to_list()
    ids = dict(zip(names, ordered.get_column("job_id").to_list(), strict=True))
    folders = job_folders(names)
    digests, meta_of = contents_and_meta(session, ids.values())
    meta = {name: meta_of.get(ids[name], {}) for name in names}
    exp_key = expectations_key(exp)
    studies = job_studies(session, list(ids.values()))  # a page is its own study's
    study_keys = {
        study: expectations_key(study_judging(session, exp, study))
        for study in set(studies.values())
    }
    keys = {
        name: page_key(digests[i], meta[name], study_keys[studies[i]], folders[name])
        for name, i in ids.items()
    }

    manifest = read_manifest(out_dir)
    kept = kept_entries(manifest, keys, folders, out_dir, force=force)
    generated = f"generated {format_time(datetime.now(UTC))} by tracker {tracker.__version__}"
    tasks = [
        Task(name, ids[name], folders[name], keys[name], out_dir, generated)
        for name in names
        if name not in kept
    ]
    rendered = render_all(session, exp, tasks)
    entries = {name: kept.get(name) or rendered[name] for name in names}
    earlier = manifest.get("jobs", {})
    stored = set(job_names(session))
    # the pages of jobs still stored but not selected stay (links to them keep working), with
    # their entries; an entry of another manifest format cannot be read back, so it goes
    retained = {
        name: entry
        for name, entry in earlier.items()
        if name not in folders
        and name in stored
        and not prune
        and manifest.get("format") == MANIFEST_FORMAT
    }
    gone = {name: entry for name, entry in earlier.items() if name not in retained}
    removed = remove_unused(out_dir, gone, [*folders.values(), *_folders(retained)])

    listed = index_entries(folders, entries)
    view = index_view(session, ordered, listed, meta, exp, selection, CLAIMS_NONE)
    index = write_index(out_dir, view, generated, exp.source)
    write_manifest(out_dir, exp_key, {**retained, **entries})
    jobs = [
        JobReport(
            name,
            out_dir / folders[name] / INDEX,
            entries[name]["tally"],
            list(entries[name]["notes"]),
            name in rendered,
        )
        for name in names
    ]
    return Report(index, jobs, removed)


def _folders(entries: dict[str, object]) -> list[str]:
    return [str(e.get("folder")) for e in entries.values() if isinstance(e, dict)]

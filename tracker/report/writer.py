"""``tracker report``: analyse jobs from the database and write an offline HTML report.

Layout of ``DIR``::

    index.html             summary; across jobs (2+): bytes/param and validation loss per
                           variant, each arm's loss per job, the two most recent jobs compared;
                           then every job: verdict table, figures, link to its page
    plotly.min.js          written once; every page links it by a relative path (no CDN)
    <job>/index.html       the job page: metadata, notes, verdict table, three figures
    <job>/mem_analysis.json, gpt_analysis.json, verdicts.json   (strict JSON, NaN -> null)
    <job>/mem_scaling.html, gpt_trajectories.html, table4.html  (one figure each)

Curves are smoothed and checked on all their points; only the drawn traces are downsampled,
so a job's folder stays well under 5 MB whatever its curve lengths.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import tracker
from tracker.errors import NotADirectory
from tracker.report.crossjob import CrossJob, cross_job_section
from tracker.report.html import (
    FigureSlot,
    chips,
    counts,
    esc,
    figure_html,
    figure_slot,
    meta_html,
    notes_html,
    page,
    verdict_table,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from tracker.analysis.expectations import Expectations
    from tracker.analysis.job import JobAnalysis
    from tracker.figures.crossjob import DrawnCurve
    from tracker.models import Job
    from tracker.store.jobdata import JobData

PLOTLY_JS = "plotly.min.js"
INDEX = "index.html"
RESERVED = {INDEX, PLOTLY_JS}
# (file, title, height) of each figure, in page order
FIGURES: tuple[tuple[str, str, int], ...] = (
    ("mem_scaling", "Memory: bytes/param vs model size", 480),
    ("gpt_trajectories", "Training trajectories", 480),
    ("table4", "Table 4 extrapolation (Llama-3.1-8B)", 440),
)


@dataclass(frozen=True)
class JobReport:
    """What was written for one job, for the command line to print."""

    job: str
    page: Path  # DIR/<job>/index.html
    counts: dict[str, int]  # PASS / FAIL / N/A
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        tally = ", ".join(f"{n} {status}" for status, n in self.counts.items())
        return f"{self.job}: {tally}"


@dataclass(frozen=True)
class Report:
    index: Path  # DIR/index.html
    jobs: list[JobReport]

    def summary(self) -> str:
        lines = [job.summary() for job in self.jobs]
        lines.append(f"report: {self.index}")
        return "\n".join(lines)


@dataclass
class _JobPage:
    """What the pages of one job need; the full curves themselves are not kept."""

    name: str
    directory: str  # folder name under DIR
    ingested: str
    probes: int
    arms: int
    meta: list[tuple[str, str]]
    analysis: JobAnalysis
    notes: list[str]
    slots: dict[str, FigureSlot]
    captions: dict[str, str]
    curves: dict[str, DrawnCurve]  # arm -> smoothed, downsampled loss, for the cross-job section


def _job_names(session: Session, jobs: Sequence[str] | None) -> list[str]:
    """``jobs`` as given (unknown names raise), or every job in job order when None."""
    from tracker.queries.selection import Selection, selected_jobs
    from tracker.store.catalog import get_job

    if jobs is None:
        return list(selected_jobs(session, Selection()).get_column("job"))
    names = list(dict.fromkeys(jobs))
    for name in names:
        get_job(session, name)  # JobNotFound before anything is written
    return names


def _directories(names: Sequence[str]) -> dict[str, str]:
    """Folder per job: its name, unless reserved or equal to another's on a case-blind disk.

    Job names are ``[A-Za-z0-9._-]`` (checked at ingest); ``+`` never occurs in one, so a
    suffixed folder cannot collide with another job's.
    """
    taken: set[str] = {name.casefold() for name in RESERVED}
    folders = {}
    for name in names:
        folder, n = name, 1
        while folder.casefold() in taken:
            n += 1
            folder = f"{name}+{n}"
        taken.add(folder.casefold())
        folders[name] = folder
    return folders


def _build_job(
    session: Session,
    name: str,
    directory: str,
    exp: Expectations,
    position: int,
    curve_points: int | None,
) -> _JobPage:
    """A job's analysis and figures; with ``curve_points``, also its arms' smoothed curves
    reduced to that many points each, for the cross-job section (the full curves are not
    kept, and not read again)."""
    from tracker.analysis.job import analyze_job
    from tracker.figures import memory_scaling, table4, training_trajectories
    from tracker.figures.crossjob import drawn_curve
    from tracker.store.catalog import get_job
    from tracker.store.jobdata import load_job_data

    job = get_job(session, name)
    data = load_job_data(session, name)
    analysis = analyze_job(data, exp)
    gpu = data.meta.get("gpu")
    figures = {
        "mem_scaling": memory_scaling(data.probes, exp, gpu=gpu),
        "gpt_trajectories": training_trajectories(data.curves, exp, gpu=gpu),
        "table4": table4(analysis.verdicts),
    }
    notes = list(analysis.notes)
    if data.probes.height == 0:
        notes.append("no memory probes in this job: no memory figure and no Table 4 figure")
    if data.runs.height == 0:
        notes.append("no training arms in this job: no trajectories figure")
    slots, captions = {}, {}
    for key, title, height in FIGURES:
        slots[key] = figure_slot(figures[key], f"j{position}-{key}", title, height)
        captions[key] = f'<a href="{quote(directory)}/{key}.html">{esc(key)}.html</a>'
    drawn = {}
    if curve_points is not None:
        alpha = exp.training.ema_alpha
        drawn = {arm: drawn_curve(frame, alpha, curve_points) for arm, frame in data.curves.items()}
    return _JobPage(
        name=name,
        directory=directory,
        ingested=job.ingested_at.isoformat(timespec="seconds"),
        probes=data.probes.height,
        arms=data.runs.height,
        meta=_meta_items(job, data, exp),
        analysis=analysis,
        notes=notes,
        slots=slots,
        captions=captions,
        curves=drawn,
    )


def _meta_items(job: Job, data: JobData, exp: Expectations) -> list[tuple[str, str]]:
    points = sum(frame.height for frame in data.curves.values())
    failed = int(data.probes.get_column("n_params").is_null().sum()) if data.probes.height else 0
    items = [
        ("job", job.name),
        ("ingested", job.ingested_at.isoformat(timespec="seconds")),
        ("source", job.source_path),
        ("memory probes", f"{data.probes.height} ({failed} failed)"),
        ("training arms", ", ".join(data.runs.get_column("arm").to_list()) or "none"),
        ("loss points", f"{points:,}"),
    ]
    items += [(f"meta: {key}", value) for key, value in sorted(data.meta.items())]
    items.append(("expectations", exp.source))
    return items


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _job_files(out_dir: Path, job: _JobPage, generated: str) -> JobReport:
    from tracker.analysis.job import to_json

    folder = out_dir / job.directory
    folder.mkdir(exist_ok=True)
    analysis = job.analysis
    _write(folder / "mem_analysis.json", to_json(analysis.mem) + "\n")
    _write(folder / "gpt_analysis.json", to_json(analysis.gpt) + "\n")
    _write(folder / "verdicts.json", to_json([v.as_dict() for v in analysis.verdicts]) + "\n")

    plotly_src = f"../{PLOTLY_JS}"
    crumbs = f'<nav class="crumbs"><a href="../{INDEX}">all jobs</a> / {esc(job.name)}</nav>'
    for key, title, _height in FIGURES:
        slot = job.slots[key]
        body = (
            f'<section class="card">{figure_html(slot)}'
            f'<p class="muted">Job page: <a href="{INDEX}">{esc(job.name)}</a></p></section>'
        )
        _write(
            folder / f"{key}.html",
            page(
                f"{esc(job.name)}: {esc(title)}",
                body,
                plotly_src=plotly_src,
                heading=f"{crumbs}{esc(job.name)}: {esc(title)}",
                sub=esc(generated),
            ),
        )

    tally = counts(analysis.verdicts)
    figures = "".join(
        f"<h3>{esc(title)}</h3>"
        + figure_html(job.slots[key], f'<a href="{key}.html">{esc(key)}.html</a>')
        for key, title, _height in FIGURES
    )
    downloads = " &middot; ".join(
        f'<a href="{name}">{name}</a>'
        for name in ("verdicts.json", "mem_analysis.json", "gpt_analysis.json")
    )
    body = (
        f'<section class="card"><h2>{esc(job.name)} {chips(tally)}</h2>'
        f"{meta_html(job.meta)}{notes_html(job.notes)}"
        f'<p class="muted">Data: {downloads}</p></section>'
        f'<section class="card"><h2>Verdicts {chips(tally)}</h2>'
        f"{verdict_table(analysis.verdicts)}</section>"
        f'<section class="card"><h2>Figures</h2>{figures}</section>'
    )
    _write(
        folder / INDEX,
        page(
            f"{esc(job.name)}: tracker report",
            body,
            plotly_src=plotly_src,
            heading=f"{crumbs}Job {esc(job.name)}",
            sub=esc(generated),
        ),
    )
    return JobReport(job.name, folder / INDEX, tally, list(job.notes))


def _index(
    pages: list[_JobPage],
    reports: list[JobReport],
    cross: CrossJob,
    exp: Expectations,
    generated: str,
) -> str:
    overview_rows = []
    for job, report in zip(pages, reports, strict=True):
        link = f"{quote(job.directory)}/{INDEX}"
        c = report.counts
        overview_rows.append(
            f'<tr class="{"fail" if c["FAIL"] else "pass" if c["PASS"] else "na"}">'
            f'<td class="name"><a href="#job-{esc(job.directory)}">{esc(job.name)}</a></td>'
            f"<td>{chips(c)}</td>"
            f'<td class="num">{job.probes}</td>'
            f'<td class="num">{job.arms}</td>'
            f"<td>{esc(job.ingested)}</td>"
            f'<td><a href="{link}">job page</a></td></tr>'
        )
    overview = (
        '<section class="card"><h2>Jobs</h2>'
        + (
            '<table class="overview"><thead><tr><th>job</th><th>verdicts</th>'
            '<th class="num">probes</th><th class="num">arms</th><th>ingested</th><th></th>'
            "</tr></thead><tbody>" + "".join(overview_rows) + "</tbody></table>"
            if pages
            else '<p class="muted">No jobs in the database.</p>'
        )
        + cross.summary_html()
        + "</section>"
    )
    sections = []
    for job, report in zip(pages, reports, strict=True):
        link = f"{quote(job.directory)}/{INDEX}"
        figures = "".join(
            f"<h3>{esc(title)}</h3>" + figure_html(job.slots[key], job.captions[key])
            for key, title, _height in FIGURES
        )
        sections.append(
            f'<section class="card" id="job-{esc(job.directory)}">'
            f'<h2><a href="{link}">{esc(job.name)}</a> {chips(report.counts)}</h2>'
            f"{notes_html(job.notes)}"
            f"<h3>Verdicts</h3>{verdict_table(job.analysis.verdicts, failures_first=True)}"
            f"{figures}</section>"
        )
    sub = f"{esc(generated)} &middot; expectations: {esc(exp.source)}"
    return page(
        "FlashOptim reproduction: tracker report",
        overview + cross.html + "".join(sections),
        plotly_src=PLOTLY_JS,
        heading=f"FlashOptim reproduction: {len(pages)} job{'s' if len(pages) != 1 else ''}",
        sub=sub,
    )


def generate_report(
    session: Session, out_dir: Path, exp: Expectations, jobs: list[str] | None = None
) -> Report:
    """Write the report of ``jobs`` (all, in job order, when None) under ``out_dir``.

    Raises ``JobNotFound`` for an unknown job name before writing anything, and
    ``NotADirectory`` when ``out_dir`` exists as something else than a directory.
    """
    from plotly.offline import get_plotlyjs

    from tracker.figures.crossjob import points_per_curve

    out_dir = Path(out_dir)
    names = _job_names(session, jobs)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectory(path=str(out_dir))
    out_dir.mkdir(parents=True, exist_ok=True)
    folders = _directories(names)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    generated = f"generated {stamp} by tracker {tracker.__version__}"

    # each curve is read once, for its job's page; the cross-job section keeps it smoothed
    # and downsampled, to a budget of points per figure
    curve_points = points_per_curve(len(names)) if len(names) >= 2 else None
    pages, reports = [], []
    for position, name in enumerate(names, start=1):
        job = _build_job(session, name, folders[name], exp, position, curve_points)
        reports.append(_job_files(out_dir, job, generated))
        pages.append(job)
    cross = cross_job_section(
        session,
        names,
        folders,
        {job.name: job.curves for job in pages},
        {job.name: job.analysis.verdicts for job in pages},
        exp,
        INDEX,
    )
    _write_if_changed(out_dir / PLOTLY_JS, get_plotlyjs())
    index = out_dir / INDEX
    _write(index, _index(pages, reports, cross, exp, generated))
    return Report(index, reports)


def _write_if_changed(path: Path, text: str) -> None:
    """plotly.min.js: rewritten only when absent or different (it is 4-5 MB)."""
    data = text.encode("utf-8")
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def write_report(
    session: Session, out_dir: Path, exp: Expectations, jobs: list[str] | None = None
) -> Path:
    """Write the report (see ``generate_report``) and return ``out_dir/index.html``."""
    return generate_report(session, out_dir, exp, jobs).index

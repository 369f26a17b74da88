"""The pages as pure functions: view data in, one HTML string out. No file I/O.

Templates live in ``templates/`` (see ``tracker.views.templates``) and escape every value
they are given. A figure is embedded as JSON in a ``<script type="application/json">``
element (``to_figure_json`` writes ``<`` and ``>`` as ``\\u`` escapes, so no text can end it)
and drawn by one small script with the plotly.js the page links by a relative path.
The report writes these pages to files; the server renders the same ones with its own links.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from tracker.domain import Status
from tracker.jsonio import to_figure_json
from tracker.views.templates import environment

if TYPE_CHECKING:
    from tracker.analysis.verdict import Verdict
    from tracker.figures.style import Figure


CLAIMS_MISSING = "No claims were computed for this report."


@dataclass(frozen=True)
class FigureSlot:
    """One figure of a page: its JSON (already safe inside a script element) or, when it
    has nothing to draw, the note it shows instead."""

    key: str  # unique within the page: the div id
    title: str
    json: Markup | None
    height: int
    note: str = ""


def figure_slot(fig: Figure, key: str, title: str, height: int) -> FigureSlot:
    """A figure's slot: its JSON, or, when it has no trace, the note it shows instead."""
    if not fig["data"]:
        texts = [a["text"] for a in fig["layout"].get("annotations", ()) if a.get("text")]
        # the note was escaped for plotly; the template escapes it again itself
        note = html.unescape(texts[0]) if texts else "nothing to draw"
        return FigureSlot(key=key, title=title, json=None, height=height, note=note)
    return FigureSlot(key=key, title=title, json=Markup(to_figure_json(fig)), height=height)


@dataclass(frozen=True)
class JobFigure:
    file: str  # the figure's own page, next to the job page
    title: str
    slot: FigureSlot


@dataclass(frozen=True)
class JobView:
    """What a job's pages show."""

    name: str
    meta: list[tuple[str, str]]
    notes: list[str]
    tally: dict[str, int]  # PASS / FAIL / KNOWN / N/A
    verdicts: list[Verdict]  # failures first
    figures: list[JobFigure]


@dataclass(frozen=True)
class JobRow:
    """One row of the index's jobs table."""

    name: str
    href: str
    time: str
    tally: dict[str, int]
    probes: int
    arms: int
    meta: str  # "key=value, ..."
    status: str  # fail / pass / na: what the table filters on


@dataclass(frozen=True)
class IndexView:
    rows: list[JobRow]  # newest first
    tally: dict[str, int]  # summed over the jobs
    failing: int  # jobs with at least one FAIL (KNOWN is no failure)
    cross: Any  # tracker.views.across_jobs.CrossJobView
    claims: Sequence[Mapping[str, Any]] = ()
    claims_note: str = CLAIMS_MISSING  # shown when there are no claim rows
    page_size: int = 25
    heading: str = "FlashOptim reproduction"  # the titles of the jobs' studies


def _render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def job_page(job: JobView, generated: str, *, plotly_src: str, index_href: str) -> str:
    """A job's page: metadata, notes, verdicts (failures first), its three figures."""
    links = dict(generated=generated, plotly_src=plotly_src, crumbs=index_href)
    return _render("job.html", job=job, job_name=job.name, **links)


def figure_page(
    job: JobView, fig: JobFigure, generated: str, *, plotly_src: str, index_href: str
) -> str:
    """One figure of a job on a page of its own."""
    links = dict(generated=generated, plotly_src=plotly_src, crumbs=index_href)
    return _render("figure.html", job=job, fig=fig, job_name=job.name, **links)


def index_page(index: IndexView, generated: str, expectations: str, *, plotly_src: str) -> str:
    """The summary over every job: claims, the jobs table, the figures across jobs."""
    shown = {field.name: getattr(index, field.name) for field in fields(index)}
    context = dict(generated=generated, expectations=expectations, plotly_src=plotly_src)
    return _render("index.html", **shown, **context, crumbs=None)


def meta_text(meta: Mapping[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(meta.items()))


def status_of(tally: Mapping[str, int]) -> str:
    """What the jobs table filters on: any FAIL, else any PASS or KNOWN (checked, nothing
    failed: a known difference is no failure), else nothing checked."""
    if tally.get(Status.FAIL):
        return "fail"
    return "pass" if tally.get(Status.PASS) or tally.get(Status.KNOWN) else "na"

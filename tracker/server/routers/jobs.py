"""``/``: the report's index, live (every job with its verdict counts, sorted by the column
the URL names; the claims; the figures across jobs); ``/jobs/{name}/``: one job's page, the
report's own, with the files the report writes beside it (its figures' pages and its
analyses as JSON)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from tracker.analysis.verdict import verdicts_document
from tracker.domain import ClaimStatus
from tracker.jsonio import to_json
from tracker.queries.tables import PROBE_METRICS, RUN_METRICS
from tracker.server.deps import ServedDep, SessionDep
from tracker.server.page_cache import (
    ServerKeeping,
    catalog_state,
    job_analysis,
    job_href,
    job_list,
    live_job,
)
from tracker.server.responses import TrackerJSON, page, render
from tracker.server.routers.claims import CLAIMS_NOTE
from tracker.server.schemas import JobDetail, JobRow
from tracker.store.catalog import get_job, job_arms, job_curves, job_probes
from tracker.views.home import JOB_SORTS, jobs_page, live_index, sort_rows

router = APIRouter(tags=["jobs"])
ANALYSES = ("verdicts.json", "mem_analysis.json", "gpt_analysis.json")
REPRODUCED_NOTE = '{n} more reproduced: <a href="/claims">all claims</a>.'
SORT_NOTE = "Newest first (job order: time metadata, else ingest time)."


SortKey = StrEnum("SortKey", {key: key for key in JOB_SORTS})  # type: ignore[misc]
DEFAULT_SORT = SortKey("time")
Sort = Annotated[SortKey, Query(description="The jobs table's column to sort by.")]
Order = Annotated[Literal["asc", "desc"], Query(description="asc or desc.")]
Words = Annotated[
    str, Query(description="Words each job listed holds in its name, time or metadata.")
]
RowStatus = Annotated[
    Literal["", "fail", "pass", "na"],
    Query(description="Jobs with a FAIL, with none, with nothing checked; empty: any."),
]
Page = Annotated[int, Query(ge=1, description="The jobs table's page, from 1.")]


def _reproduced_note(claims: Sequence[Mapping[str, Any]]) -> Markup | str:
    n = sum(claim["status"] == ClaimStatus.REPRODUCED for claim in claims)
    return Markup(REPRODUCED_NOTE).format(n=n) if n else ""


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(
    request: Request,
    session: SessionDep,
    served: ServedDep,
    sort: Sort = DEFAULT_SORT,
    order: Order = "desc",
    q: Words = "",
    status: RowStatus = "",
    page: Page = 1,
) -> HTMLResponse:
    state = catalog_state(session)

    def index_html() -> str:
        keeping = ServerKeeping(served, state)  # its claims and yardstick, for other pages
        view = served.across_jobs.get(
            ("home", state),
            lambda: live_index(session, served.exp, job_href, served.study, keeping),
        )
        # the server sends a page of the jobs table: thousands of rows are megabytes to render
        sorted_rows = sort_rows(view.rows, sort.value, order == "desc")
        return render(
            request,
            "server/index.html",
            rows=view.rows,  # every job: the table shows ``jobs``, a page of them
            jobs=jobs_page(sorted_rows, q, status, page, view.page_size),
            ordered=[row.name for row in reversed(view.rows)],  # in job order
            sort=(sort.value, order == "desc"),
            sort_note=SORT_NOTE if (sort.value, order) == ("time", "desc") else "",
            tally=view.tally,
            failing=view.failing,
            heading=view.heading,
            cross=view.cross,
            # the home page lists what needs a look; the reproduced ones are a link away
            claims=[c for c in view.claims if c["status"] != ClaimStatus.REPRODUCED],
            claims_more=_reproduced_note(view.claims),
            claims_note=CLAIMS_NOTE if not view.claims else "Every claim is reproduced.",
            crumbs=None,
            claims_json="/api/claims",
            live=True,
            page_size=view.page_size,
            metrics=(*PROBE_METRICS, *RUN_METRICS),
        )

    shown = ("index", state, sort, order, q, status, page)
    return HTMLResponse(served.across_jobs.get(shown, index_html))


@router.get("/api/jobs", response_class=TrackerJSON, response_model=list[JobRow])
def api_jobs(session: SessionDep, served: ServedDep) -> list[JobRow]:
    """Every job with its counts and metadata, in job order (``tracker.api.jobs``)."""
    return [JobRow.model_validate(row) for row in job_list(served, session)]


@router.get("/jobs/{name}/", response_class=HTMLResponse, include_in_schema=False)
@router.get("/jobs/{name}/index.html", response_class=HTMLResponse, include_in_schema=False)
def job_page(request: Request, name: str, session: SessionDep, served: ServedDep) -> HTMLResponse:
    content = live_job(served, session, name)
    jobs = [row["job"] for row in job_list(served, session)]  # in job order
    at = jobs.index(name)
    return page(
        request,
        "server/job.html",
        job=content.view,
        job_name=name,
        curves=content.curve_rows,
        stopped=content.stopped,
        previous=jobs[at - 1] if at > 0 else None,
        following=jobs[at + 1] if at + 1 < len(jobs) else None,
    )


@router.get("/jobs/{name}/{file}", include_in_schema=False)
def job_file(request: Request, name: str, file: str, session: SessionDep, served: ServedDep):
    """What the report writes beside a job's page, so that its links work here too."""
    job = live_job(served, session, name)
    figures = {figure.file: figure for figure in job.view.figures}
    if file in figures:
        return page(request, "server/figure.html", job=job.view, fig=figures[file], job_name=name)
    if file not in ANALYSES:
        raise HTTPException(status_code=404, detail=f"job {name!r} has no file {file!r}")
    analysis = job.analysis
    document = {
        "verdicts.json": lambda: verdicts_document(analysis.verdicts),
        "mem_analysis.json": lambda: analysis.mem,
        "gpt_analysis.json": lambda: analysis.gpt,
    }[file]()
    return Response(to_json(document) + "\n", media_type="application/json")


@router.get("/api/jobs/{name}", response_class=TrackerJSON, response_model=JobDetail)
def api_job(name: str, session: SessionDep, served: ServedDep) -> JobDetail:
    """One job: metadata, probes, arms, curves and verdicts (``tracker show`` and more)."""
    analysis = job_analysis(served, session, name)
    return JobDetail.model_validate(
        {
            "job": name,
            "meta": {item.key: item.value for item in get_job(session, name).meta},
            "probes": job_probes(session, name),
            "arms": job_arms(session, name),
            "curves": job_curves(session, name),
            "verdicts": verdicts_document(analysis.verdicts),  # as verdicts.json gives them
        }
    )

"""``/``: the claims and every job; ``/jobs/{name}``: one job's verdicts and figures (a
name is matched as a path: a job name from another tool may hold a slash)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tracker.server.deps import ServedDep, SessionDep
from tracker.server.responses import TrackerJSON, page, rows
from tracker.server.views import job_analysis, job_view
from tracker.store.catalog import get_job, job_arms, job_curves, job_probes, list_jobs

router = APIRouter(tags=["jobs"])


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(request: Request, session: SessionDep, served: ServedDep) -> HTMLResponse:
    from tracker.queries.selection import Selection
    from tracker.queries.tables import PROBE_METRICS, RUN_METRICS
    from tracker.server.routers.claims import claims_table

    return page(
        request,
        "index.html",
        jobs=list_jobs(session),
        claims=rows(claims_table(served, session, Selection())),
        metrics=(*PROBE_METRICS, *RUN_METRICS),
    )


@router.get("/api/jobs", response_class=TrackerJSON)
def api_jobs(session: SessionDep) -> TrackerJSON:
    """Every job with its counts and metadata, in job order (``tracker.api.jobs``)."""
    return TrackerJSON(list_jobs(session))


@router.get("/jobs/{name:path}", response_class=HTMLResponse, include_in_schema=False)
def job_page(request: Request, name: str, session: SessionDep, served: ServedDep) -> HTMLResponse:
    from tracker.queries.selection import Selection, selected_jobs

    view = job_view(served, session, name)
    jobs = selected_jobs(session, Selection()).get_column("job").to_list()
    at = jobs.index(name)
    return page(
        request,
        "job.html",
        view=view,
        probes=job_probes(session, name),
        arms=job_arms(session, name),
        curves=job_curves(session, name),
        previous=jobs[at - 1] if at > 0 else None,
        following=jobs[at + 1] if at + 1 < len(jobs) else None,
    )


@router.get("/api/jobs/{name:path}", response_class=TrackerJSON)
def api_job(name: str, session: SessionDep, served: ServedDep) -> TrackerJSON:
    """One job: metadata, probes, arms, curves and verdicts (``tracker show`` and more)."""
    analysis = job_analysis(served, session, name)
    return TrackerJSON(
        {
            "job": name,
            "meta": {item.key: item.value for item in get_job(session, name).meta},
            "probes": job_probes(session, name),
            "arms": job_arms(session, name),
            "curves": job_curves(session, name),
            "verdicts": [verdict.as_dict() for verdict in analysis.verdicts],
        }
    )
